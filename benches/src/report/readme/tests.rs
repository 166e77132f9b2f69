use std::path::Path;

use serde_json::json;

use super::*;
use crate::report::machine::Machine;
use crate::report::{Plot, Target};

fn report(name: &str, plots: &[&str]) -> Report {
    let mut table = Table::new("median of 5 rounds", &["measure", "ours", "theirs"]);
    table.row(vec![
        "round trips/s".into(),
        "326,700".into(),
        "79,927".into(),
    ]);
    table.row(vec!["a | b".into(), "1|2".into(), String::new()]);
    table.note("¹ first note");
    table.note("² second note");
    Report {
        name: name.into(),
        description: format!("`cargo xtask bench {name}` runs things.\n"),
        tables: vec![table],
        targets: vec![
            Target {
                name: "p99 <= 0.5x".into(),
                measured: "0.44x".into(),
                met: true,
            },
            Target {
                name: "throughput >= 2x".into(),
                measured: "1.5x".into(),
                met: false,
            },
        ],
        cdfs: Vec::new(),
        readme_plots: None,
        plots: plots
            .iter()
            .map(|slug| Plot {
                file: format!("{name}-{slug}.svg"),
                title: format!("{slug} [cancel]"),
                readme: true,
            })
            .collect(),
        machine: Some(Machine {
            cpu: "Test CPU @ 3 GHz".into(),
            cores: 2,
            memory_gib: 7.8,
            os: "linux 6.8.0".into(),
        }),
        date: "2026-11-23T20:16:42Z".into(),
        data: json!({"rounds": [1, 2]}),
    }
}

const README: &str = "# title\n\nintro\n\n<!-- bench:peer:begin -->\nold peer table\n\
                      <!-- bench:peer:end -->\n\nbetween\n\n<!-- bench:macro:begin -->\n\
                      old macro table\n<!-- bench:macro:end -->\n\nend\n";

/// A README, `target/bench` and `docs/bench` in a temporary directory.
struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new(readme: &str) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("README.md"), readme).unwrap();
        std::fs::create_dir_all(dir.path().join("target/bench")).unwrap();
        Fixture { dir }
    }

    fn readme(&self) -> PathBuf {
        self.dir.path().join("README.md")
    }

    fn bench(&self) -> PathBuf {
        self.dir.path().join("target/bench")
    }

    fn docs(&self) -> PathBuf {
        self.dir.path().join("docs/bench")
    }

    /// Saves `report` as `Report::finish` does, with a plot file for each of its plots.
    fn save(&self, report: &Report) {
        for plot in &report.plots {
            std::fs::write(
                self.bench().join(&plot.file),
                format!("<svg>{}</svg>", plot.file),
            )
            .unwrap();
        }
        let text = serde_json::to_string_pretty(report).unwrap();
        std::fs::write(self.bench().join(format!("{}.json", report.name)), text).unwrap();
    }

    fn update(&self) -> Result<Outcome, String> {
        update(&self.readme(), &self.bench(), &self.docs())
    }

    fn text(&self) -> String {
        std::fs::read_to_string(self.readme()).unwrap()
    }
}

#[test]
fn a_report_renders_as_markdown() {
    let expected = "\
`cargo xtask bench peer` runs things.

Measured on 2 cores of Test CPU @ 3 GHz, 8 GiB, linux 6.8.0, 2026-11-23 20:16 UTC.

**median of 5 rounds**

| measure | ours | theirs |
|---|---:|---:|
| round trips/s | 326,700 | 79,927 |
| a \\| b | 1\\|2 |  |

¹ first note
² second note

- p99 <= 0.5x: 0.44x — **met**
- throughput >= 2x: 1.5x — **MISSED**

![idle \\[cancel\\]](docs/bench/peer-idle.svg)

![loaded \\[cancel\\]](docs/bench/peer-loaded.svg)";
    assert_eq!(render(&report("peer", &["idle", "loaded"])), expected);
}

#[test]
fn a_report_without_machine_or_date_still_renders() {
    let mut bare = Report::new("load", "");
    bare.tables.push(Table::new("", &["a"]));
    assert_eq!(
        render(&bare),
        "Measured on an unrecorded machine.\n\n| a |\n|---|"
    );
    bare.date = "yesterday".into();
    assert_eq!(
        render(&bare),
        "Measured on an unrecorded machine, yesterday.\n\n| a |\n|---|"
    );
}

#[test]
fn splice_replaces_only_what_is_between_the_markers() {
    let spliced = splice(README, "peer", "new peer\ntable\n").unwrap();
    assert_eq!(
        spliced,
        README.replace(
            "<!-- bench:peer:begin -->\nold peer table\n",
            "<!-- bench:peer:begin -->\n\nnew peer\ntable\n\n"
        )
    );
    assert_eq!(
        splice(&spliced, "peer", "new peer\ntable").unwrap(),
        spliced
    );
    let emptied = splice(README, "macro", "").unwrap();
    assert!(emptied.contains("<!-- bench:macro:begin -->\n<!-- bench:macro:end -->\n\nend\n"));
}

#[test]
fn splice_names_a_missing_duplicated_or_misplaced_marker() {
    let missing_end = README.replace("<!-- bench:peer:end -->", "");
    let twice = format!("{README}<!-- bench:peer:begin -->\n");
    let reversed = "<!-- bench:rap:end -->\n<!-- bench:rap:begin -->\n";
    let cases = [
        (
            README,
            "gateway",
            "the README has no `<!-- bench:gateway:begin -->`",
        ),
        (
            &missing_end,
            "peer",
            "the README has no `<!-- bench:peer:end -->`",
        ),
        (&twice, "peer", "`<!-- bench:peer:begin -->` more than once"),
        (
            reversed,
            "rap",
            "`<!-- bench:rap:end -->` before `<!-- bench:rap:begin -->`",
        ),
    ];
    for (text, name, message) in cases {
        let error = splice(text, name, "x").unwrap_err();
        assert!(error.contains(message), "{name}: {error}");
    }
}

#[test]
fn update_renders_each_report_into_its_block_and_leaves_the_rest() {
    let fixture = Fixture::new(README);
    fixture.save(&report("peer", &[]));
    let outcome = fixture.update().unwrap();
    assert_eq!(
        outcome,
        Outcome {
            updated: vec!["peer".into()],
            left: vec!["macro".into()],
        }
    );
    let text = fixture.text();
    let expected = splice(README, "peer", &render(&report("peer", &[]))).unwrap();
    assert_eq!(text, expected);
    assert!(text.contains("old macro table"));
    assert!(!text.contains("old peer table"));
    // Running it again changes nothing.
    fixture.update().unwrap();
    assert_eq!(fixture.text(), expected);
}

#[test]
fn update_copies_the_plots_beside_the_readme_and_shows_them() {
    let fixture = Fixture::new(README);
    fixture.save(&report("peer", &["idle", "loaded"]));
    fixture.update().unwrap();
    for file in ["peer-idle.svg", "peer-loaded.svg"] {
        let copied = std::fs::read_to_string(fixture.docs().join(file)).unwrap();
        assert_eq!(copied, format!("<svg>{file}</svg>"));
        assert!(fixture.text().contains(&format!("](docs/bench/{file})")));
    }
    // A plot the report no longer has leaves docs/bench with its image.
    fixture.save(&report("peer", &["idle"]));
    fixture.update().unwrap();
    assert!(fixture.docs().join("peer-idle.svg").is_file());
    assert!(!fixture.docs().join("peer-loaded.svg").exists());
    assert!(!fixture.text().contains("peer-loaded.svg"));
}

#[test]
fn a_report_whose_plot_is_missing_changes_nothing() {
    let fixture = Fixture::new(README);
    fixture.save(&report("peer", &["idle"]));
    std::fs::remove_file(fixture.bench().join("peer-idle.svg")).unwrap();
    let error = fixture.update().unwrap_err();
    assert!(
        error.contains("peer.json lists the plot `peer-idle.svg`"),
        "{error}"
    );
    assert_eq!(fixture.text(), README);
}

#[test]
fn a_file_that_is_not_a_report_is_named() {
    let fixture = Fixture::new(README);
    fixture.save(&report("peer", &[]));
    std::fs::write(fixture.bench().join("load.json"), r#"{"requests": 5}"#).unwrap();
    std::fs::write(fixture.bench().join("rap.json"), "{ not json").unwrap();
    let error = fixture.update().unwrap_err();
    assert!(
        error.contains("load.json is not a benchmark report"),
        "{error}"
    );
    assert!(
        error.contains("rap.json is not a benchmark report"),
        "{error}"
    );
    assert_eq!(fixture.text(), README);
}

#[test]
fn a_report_without_markers_asks_for_them() {
    let fixture = Fixture::new(README);
    fixture.save(&report("peer", &[]));
    fixture.save(&report("gateway", &[]));
    let error = fixture.update().unwrap_err();
    assert!(
        error.contains("add `<!-- bench:gateway:begin -->` and `<!-- bench:gateway:end -->`"),
        "{error}"
    );
    assert!(!error.contains("bench:peer"), "{error}");
    assert_eq!(fixture.text(), README);
}

#[test]
fn a_report_under_another_name_is_refused() {
    let fixture = Fixture::new(README);
    let text = serde_json::to_string(&report("macro", &[])).unwrap();
    std::fs::write(fixture.bench().join("peer.json"), text).unwrap();
    let error = fixture.update().unwrap_err();
    assert!(
        error.contains("peer.json holds the report `macro`"),
        "{error}"
    );
}

#[test]
fn no_reports_is_an_error_saying_what_to_run() {
    let fixture = Fixture::new(README);
    let error = fixture.update().unwrap_err();
    assert!(error.contains("run `cargo xtask bench` first"), "{error}");
    let error = update(
        &fixture.readme(),
        Path::new("/nonexistent/bench"),
        &fixture.docs(),
    )
    .unwrap_err();
    assert!(error.contains("/nonexistent/bench"), "{error}");
}

#[test]
fn the_docs_directory_must_be_beside_the_readme() {
    let fixture = Fixture::new(README);
    fixture.save(&report("peer", &["idle"]));
    let error = update(
        &fixture.readme(),
        &fixture.bench(),
        Path::new("/elsewhere/docs"),
    )
    .unwrap_err();
    assert!(error.contains("/elsewhere/docs is not inside"), "{error}");
    assert_eq!(fixture.text(), README);
}

#[test]
fn blocks_are_listed_once_in_readme_order() {
    let text = format!("{README}<!-- bench:peer:begin -->\n<!-- bench:bad name:begin -->\n");
    assert_eq!(block_names(&text), ["peer", "macro"]);
}

#[test]
fn the_performance_page_has_a_block_for_each_benchmark_in_the_form_splice_writes() {
    let path = crate::report::workspace_dir().join(super::PAGE);
    let text = std::fs::read_to_string(path).unwrap();
    assert_eq!(
        block_names(&text),
        [
            "macro",
            "peer",
            "rap",
            "rap_load",
            "gateway",
            "load",
            "http",
            "http-gateway"
        ]
    );
    for name in block_names(&text) {
        let block = text[block_range(&text, &name).unwrap()].to_owned();
        assert_eq!(splice(&text, &name, &block).unwrap(), text, "{name}");
    }
}

#[test]
fn a_plot_kept_out_of_the_readme_is_neither_shown_nor_copied() {
    let mut report = sample_report_for_hidden_plot();
    report.plots[1].readme = false;
    let text = render(&report);
    assert!(text.contains(&report.plots[0].file));
    assert!(!text.contains(&report.plots[1].file));
}

fn sample_report_for_hidden_plot() -> Report {
    let mut report = Report::new("peer", "a description");
    for slug in ["shown", "hidden"] {
        report.plots.push(Plot {
            file: format!("peer-{slug}.svg"),
            title: slug.into(),
            readme: true,
        });
    }
    report
}
