//! `--junit FILE`: the report as JUnit XML, for a CI's test view.
//!
//! One `<testsuite>` (`cancelkit check mcp` or `cancelkit check acp`) inside `<testsuites>`,
//! with the server's command line (or `url`), the revision, the verdict and the baseline as
//! properties; one `<testcase>` per check, named by its id, its class the scenario (the id
//! without its last part: `mcp.cancel.parallel` for `mcp.cancel.parallel.cancelled_silent`),
//! with the check's word (`MUST`, `SHOULD`, `MAY`), result, revisions and basis as properties
//! (as pytest's `record_property` writes them). A check is:
//!
//! * `<failure>` when it fails the run: a failed check that decides the verdict (type: its
//!   word; message: its detail; text: its evidence), or a stale baseline entry (type
//!   `stale-baseline`);
//! * `<skipped>` when it did not apply (`n/a`, message: its detail), or when it is an expected
//!   failure of the baseline (type `expected-failure`, as pytest reports an xfail; its
//!   evidence in `<system-out>`);
//! * passed otherwise. A failed check that does not decide the verdict (a SHOULD with
//!   `--musts-only`, a MAY) passes with its property `result` `fail` and a `<system-out>`
//!   that says so, with its detail and evidence; an `info` check passes with its detail in
//!   `<system-out>`.
//!
//! So `failures` counts exactly what made the run fail. Every text is escaped by the writer;
//! characters XML 1.0 cannot carry (control characters) become U+FFFD.

use std::io;
use std::time::Duration;

use quick_xml::Writer;
use quick_xml::escape::partial_escape;
use quick_xml::events::{BytesDecl, BytesText, Event};

use super::baseline::Applied;
use super::{Check, Outcome, Report, Word};

/// What one check is in JUnit's terms.
enum Kind {
    Passed,
    /// A passed check with a note for `<system-out>`.
    Noted(String),
    Failure {
        kind: &'static str,
        message: String,
        text: String,
    },
    Skipped {
        kind: Option<&'static str>,
        message: String,
        out: Option<String>,
    },
}

/// The JUnit XML of `report` (judged by `baseline`, if one was given), of a run that took
/// `elapsed`.
pub fn render(report: &Report, baseline: Option<&Applied>, elapsed: Duration) -> String {
    let mut writer = Writer::new_with_indent(Vec::new(), b' ', 2);
    write(&mut writer, report, baseline, elapsed).expect("writing to memory does not fail");
    String::from_utf8(writer.into_inner()).expect("the writer writes UTF-8")
}

fn write(
    w: &mut Writer<Vec<u8>>,
    report: &Report,
    baseline: Option<&Applied>,
    elapsed: Duration,
) -> io::Result<()> {
    let kinds: Vec<Kind> = report
        .checks
        .iter()
        .map(|c| kind(c, report.musts_only, baseline))
        .collect();
    let tests = report.checks.len().to_string();
    let failures = kinds
        .iter()
        .filter(|k| matches!(k, Kind::Failure { .. }))
        .count()
        .to_string();
    let skipped = kinds
        .iter()
        .filter(|k| matches!(k, Kind::Skipped { .. }))
        .count()
        .to_string();
    let time = format!("{:.3}", elapsed.as_secs_f64());
    let counts = [
        ("tests", tests.as_str()),
        ("failures", failures.as_str()),
        ("errors", "0"),
        ("skipped", skipped.as_str()),
        ("time", time.as_str()),
    ];
    let suite = format!("cancelkit check {}", report.target);
    w.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)))?;
    w.create_element("testsuites")
        .with_attribute(("name", "cancelkit check"))
        .with_attributes(counts)
        .write_inner_content(|w| {
            w.create_element("testsuite")
                .with_attribute(("name", suite.as_str()))
                .with_attributes(counts)
                .write_inner_content(|w| {
                    properties(w, &suite_properties(report, baseline))?;
                    for (check, kind) in report.checks.iter().zip(&kinds) {
                        testcase(w, check, kind, baseline)?;
                    }
                    Ok(())
                })?;
            Ok(())
        })?;
    Ok(())
}

fn suite_properties(report: &Report, baseline: Option<&Applied>) -> Vec<(&'static str, String)> {
    let mut props = vec![match &report.url {
        Some(url) => ("url", url.clone()),
        None => ("command", report.command.join(" ")),
    }];
    props.push(("target", report.target.into()));
    props.push(("revision", report.revision.clone()));
    props.push(("negotiated_by", report.negotiated_by.clone()));
    props.push(("musts_only", report.musts_only.to_string()));
    props.push(("verdict", outcome(report.verdict).into()));
    if let Some(applied) = baseline {
        props.push(("baseline", applied.path.display().to_string()));
    }
    props
}

fn properties(w: &mut Writer<Vec<u8>>, props: &[(&str, String)]) -> io::Result<()> {
    w.create_element("properties").write_inner_content(|w| {
        for (name, value) in props {
            w.create_element("property")
                .with_attribute(("name", *name))
                .with_attribute(("value", xml_safe(value).as_str()))
                .write_empty()?;
        }
        Ok(())
    })?;
    Ok(())
}

fn testcase(
    w: &mut Writer<Vec<u8>>,
    check: &Check,
    kind: &Kind,
    baseline: Option<&Applied>,
) -> io::Result<()> {
    let class = check
        .id
        .rsplit_once('.')
        .map_or(check.id, |(class, _)| class);
    let mut props = vec![
        ("word", word(check.word).to_owned()),
        ("result", outcome(check.result).to_owned()),
        ("revisions", check.revisions.join(" ")),
        ("basis", check.basis.to_owned()),
    ];
    if let Some(mark) = baseline.and_then(|b| b.mark(check.id)) {
        props.push(("baseline", mark.to_owned()));
    }
    w.create_element("testcase")
        .with_attribute(("name", check.id))
        .with_attribute(("classname", class))
        .write_inner_content(|w| {
            properties(w, &props)?;
            match kind {
                Kind::Passed => {}
                Kind::Noted(out) => system_out(w, out)?,
                Kind::Failure {
                    kind,
                    message,
                    text,
                } => {
                    w.create_element("failure")
                        .with_attribute(("message", xml_safe(message).as_str()))
                        .with_attribute(("type", *kind))
                        .write_text_content(text_node(text))?;
                }
                Kind::Skipped { kind, message, out } => {
                    let skipped = w
                        .create_element("skipped")
                        .with_attribute(("message", xml_safe(message).as_str()));
                    match kind {
                        Some(kind) => skipped.with_attribute(("type", *kind)).write_empty()?,
                        None => skipped.write_empty()?,
                    };
                    if let Some(out) = out {
                        system_out(w, out)?;
                    }
                }
            }
            Ok(())
        })?;
    Ok(())
}

fn system_out(w: &mut Writer<Vec<u8>>, text: &str) -> io::Result<()> {
    w.create_element("system-out")
        .write_text_content(text_node(text))?;
    Ok(())
}

/// Text content, escaped by quick-xml (`<`, `>`, `&`; quotes need no escape outside
/// attributes).
fn text_node(text: &str) -> BytesText<'static> {
    BytesText::from_escaped(partial_escape(xml_safe(text)).into_owned())
}

/// What `check` is in JUnit's terms.
fn kind(check: &Check, musts_only: bool, baseline: Option<&Applied>) -> Kind {
    let mark = baseline.and_then(|b| b.mark(check.id));
    let evidence = check.evidence.join("\n");
    let file = || baseline.map_or_else(String::new, |b| b.path.display().to_string());
    match (check.result, mark) {
        (Outcome::Fail, Some("expected_failure")) => Kind::Skipped {
            kind: Some("expected-failure"),
            message: format!("expected failure (baseline {}): {}", file(), check.detail),
            out: Some(evidence),
        },
        (Outcome::Fail, _) if Report::decides(check, musts_only) => Kind::Failure {
            kind: word(check.word),
            message: check.detail.clone(),
            text: evidence,
        },
        (Outcome::Fail, _) => Kind::Noted(format!(
            "failed, but a {} does not decide the verdict{}: {}\n{evidence}",
            word(check.word),
            if check.word == Word::Should {
                " with --musts-only"
            } else {
                ""
            },
            check.detail
        )),
        (Outcome::Pass, Some("stale")) => Kind::Failure {
            kind: "stale-baseline",
            message: format!(
                "passes, but the baseline {} lists it as an expected failure: remove it from \
                 the baseline",
                file()
            ),
            text: check.detail.clone(),
        },
        (Outcome::Pass, _) => Kind::Passed,
        (Outcome::NotApplicable, _) => Kind::Skipped {
            kind: None,
            message: check.detail.clone(),
            out: None,
        },
        (Outcome::Info, _) => Kind::Noted(check.detail.clone()),
    }
}

fn word(word: Word) -> &'static str {
    match word {
        Word::Must => "MUST",
        Word::Should => "SHOULD",
        Word::May => "MAY",
    }
}

fn outcome(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Pass => "pass",
        Outcome::Fail => "fail",
        Outcome::NotApplicable => "not_applicable",
        Outcome::Info => "info",
    }
}

/// `text` with each character XML 1.0 cannot carry, even escaped, replaced by U+FFFD.
fn xml_safe(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\t' | '\n' | '\r' => c,
            '\u{0}'..='\u{1f}' | '\u{fffe}' | '\u{ffff}' => '\u{fffd}',
            c => c,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_become_replacement_characters() {
        assert_eq!(xml_safe("a\u{1b}[31m\tb\n"), "a\u{fffd}[31m\tb\n");
    }
}
