use super::axis::short;
use super::*;

/// Checks what a browser needs of our SVG: tags balanced and properly nested, one root `svg`,
/// quoted attributes, no `<` inside a tag, and every `&` starting an entity.
fn check_xml(doc: &str) -> Result<(), String> {
    let mut stack: Vec<&str> = Vec::new();
    let mut roots = 0;
    let mut rest = doc;
    while let Some(open) = rest.find('<') {
        check_text(&rest[..open])?;
        rest = &rest[open..];
        if let Some(after) = rest.strip_prefix("<?") {
            let end = after.find("?>").ok_or("unterminated <?")?;
            rest = &after[end + 2..];
            continue;
        }
        if let Some(after) = rest.strip_prefix("<!--") {
            let end = after.find("-->").ok_or("unterminated comment")?;
            rest = &after[end + 3..];
            continue;
        }
        let end = tag_end(rest)?;
        let tag = &rest[1..end];
        rest = &rest[end + 1..];
        if let Some(name) = tag.strip_prefix('/') {
            match stack.pop() {
                Some(open) if open == name.trim() => {}
                other => return Err(format!("</{name}> closes {other:?}")),
            }
            continue;
        }
        let (tag, self_closing) = match tag.strip_suffix('/') {
            Some(tag) => (tag, true),
            None => (tag, false),
        };
        let name = tag
            .split_whitespace()
            .next()
            .ok_or("a tag without a name")?;
        check_text(tag)?;
        if stack.is_empty() {
            roots += 1;
            if name != "svg" {
                return Err(format!("root element <{name}>"));
            }
        }
        if !self_closing {
            stack.push(name);
        }
    }
    check_text(rest)?;
    match (stack.as_slice(), roots) {
        ([], 1) => Ok(()),
        ([], n) => Err(format!("{n} root elements")),
        (open, _) => Err(format!("unclosed {open:?}")),
    }
}

/// The index of the `>` ending the tag that `text` starts with, outside quoted values.
fn tag_end(text: &str) -> Result<usize, String> {
    let mut quoted = false;
    for (i, c) in text.char_indices().skip(1) {
        match c {
            '"' => quoted = !quoted,
            '<' => return Err(format!("`<` inside a tag: {}", &text[..i])),
            '>' if !quoted => return Ok(i),
            _ => {}
        }
    }
    Err(format!("unterminated tag: {text}"))
}

/// Every `&` in `text` starts an entity.
fn check_text(text: &str) -> Result<(), String> {
    for (i, _) in text.match_indices('&') {
        let entity = &text[i..];
        let known = ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"];
        if !known.iter().any(|k| entity.starts_with(k)) {
            return Err(format!("a bare & at {}", &entity[..entity.len().min(12)]));
        }
    }
    Ok(())
}

/// The points of every `<polyline>`, in order.
fn polylines(doc: &str) -> Vec<Vec<(f64, f64)>> {
    doc.lines()
        .filter(|l| l.starts_with("<polyline"))
        .map(|l| {
            let points = l
                .split("points=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap();
            points
                .split_whitespace()
                .map(|p| {
                    let (x, y) = p.split_once(',').unwrap();
                    (x.parse().unwrap(), y.parse().unwrap())
                })
                .collect()
        })
        .collect()
}

/// The contents of every `<text>` element.
fn texts(doc: &str) -> Vec<&str> {
    doc.split("<text")
        .skip(1)
        .map(|t| {
            t.split_once('>')
                .unwrap()
                .1
                .split("</text>")
                .next()
                .unwrap()
        })
        .collect()
}

fn plot(series: Vec<(&str, Vec<f64>)>) -> Cdf {
    Cdf {
        slug: "test".into(),
        title: "cancel latency".into(),
        x_label: "cancel -> handler stopped (µs)".into(),
        series: series
            .into_iter()
            .map(|(name, samples)| (name.to_owned(), samples))
            .collect(),
    }
}

/// `count` samples dense between 2 and 3, the slowest 1% spread up to 3,000, and one each at
/// 1 and 10,000 (a latency with a long tail).
fn long_tail(count: usize) -> Vec<f64> {
    (0..count)
        .map(|i| {
            let u = (i as f64 + 0.5) / count as f64;
            if u < 0.99 {
                2.0 + u
            } else {
                3.0 * 10f64.powf((u - 0.99) * 300.0)
            }
        })
        .chain([1.0, 10_000.0])
        .collect()
}

/// Whether the pixel `drawn` (printed with one decimal) is `exact`.
fn near(drawn: f64, exact: f64) -> bool {
    (drawn - exact).abs() <= 0.051
}

#[test]
fn the_checker_rejects_broken_xml() {
    assert!(check_xml("<svg><g></svg>").is_err());
    assert!(check_xml("<svg><text>a & b</text></svg>").is_err());
    assert!(check_xml("<svg><text a=\"<\">x</text></svg>").is_err());
    assert!(check_xml("<svg/><svg/>").is_err());
    assert!(check_xml("<?xml version=\"1.0\"?><svg><g/><text>&lt;</text></svg>").is_ok());
}

#[test]
fn a_plot_is_well_formed_xml() {
    let doc = cdf(&plot(vec![
        ("cancelkit <MCP> & co", long_tail(1_000)),
        ("rmcp \"3.9\"", vec![5.1, 6.2, 5.3]),
    ]));
    check_xml(&doc).unwrap();
    assert!(doc.contains("<title>cancel latency</title>"));
}

#[test]
fn each_series_with_samples_is_one_line_in_its_own_colour() {
    let mut series: Vec<(&str, Vec<f64>)> = (0..9).map(|_| ("s", vec![1.0, 2.0, 3.0])).collect();
    series[4].1.clear();
    let doc = cdf(&plot(series));
    let lines: Vec<&str> = doc.lines().filter(|l| l.starts_with("<polyline")).collect();
    assert_eq!(lines.len(), 8);
    let mut strokes: Vec<&str> = lines
        .iter()
        .map(|l| l.split(" points=").next().unwrap())
        .collect();
    strokes.sort_unstable();
    strokes.dedup();
    assert_eq!(strokes.len(), 8, "two series look alike: {strokes:?}");
    assert_eq!(
        texts(&doc)
            .iter()
            .filter(|t| t.contains("no samples"))
            .count(),
        1
    );
}

#[test]
fn legend_names_and_labels_are_escaped() {
    let mut input = plot(vec![("a<b & \"c\"", vec![1.0, 2.0])]);
    input.title = "x > y & 'z'".into();
    let doc = cdf(&input);
    assert!(doc.contains(">a&lt;b &amp; &quot;c&quot;</text>"), "{doc}");
    assert!(doc.contains("x &gt; y &amp; &apos;z&apos;"));
    assert!(!doc.contains("a<b"));
    check_xml(&doc).unwrap();
}

#[test]
fn samples_spanning_decades_get_a_log_axis_labelled_at_powers_of_ten() {
    let doc = cdf(&plot(vec![("a", long_tail(100))]));
    let labels = texts(&doc);
    assert!(
        labels.iter().any(|t| t.ends_with(", log scale")),
        "{labels:?}"
    );
    for tick in ["1", "10", "100", "1,000", "10,000"] {
        assert!(labels.contains(&tick), "no tick {tick} in {labels:?}");
    }
    // Over four decades, 2 and 5 are minor ticks, unlabelled.
    for minor in ["20", "50", "5,000"] {
        assert!(
            !labels.contains(&minor),
            "tick {minor} labelled in {labels:?}"
        );
    }
}

#[test]
fn a_log_axis_over_few_decades_labels_1_2_and_5() {
    let doc = cdf(&plot(vec![("a", vec![3.0, 40.0, 700.0])]));
    let labels = texts(&doc);
    for tick in ["2", "5", "10", "20", "50", "100", "200", "500", "1,000"] {
        assert!(labels.contains(&tick), "no tick {tick} in {labels:?}");
    }
    assert!(!labels.contains(&"2,000"), "{labels:?}");
}

#[test]
fn narrow_samples_get_a_linear_axis_with_round_steps() {
    let doc = cdf(&plot(vec![("a", vec![2.0, 2.1, 2.5, 2.8])]));
    let labels = texts(&doc);
    assert!(
        !labels.iter().any(|t| t.contains("log scale")),
        "{labels:?}"
    );
    for tick in ["2.0", "2.2", "2.4", "2.6", "2.8"] {
        assert!(labels.contains(&tick), "no tick {tick} in {labels:?}");
    }
    for fraction in ["0", "0.25", "0.5", "0.75", "0.9", "0.99", "1", "p50", "p99"] {
        assert!(labels.contains(&fraction), "no {fraction} in {labels:?}");
    }
}

#[test]
fn a_hundred_thousand_samples_make_at_most_500_points_and_keep_the_tail() {
    let samples = long_tail(100_000);
    let doc = cdf(&plot(vec![
        ("a", samples.clone()),
        ("b", vec![2.0; 100_000]),
    ]));
    let x = x_axis(&[Series {
        name: "a",
        sorted: samples,
    }]);
    for line in polylines(&doc) {
        assert!(line.len() <= 500, "{} points", line.len());
    }
    let line = &polylines(&doc)[0];
    assert!(near(line[0].0, px(&x, 1.0)) && near(line[0].1, py(0.0)));
    let last = line[line.len() - 1];
    assert!(
        near(last.0, px(&x, 10_000.0)) && near(last.1, py(1.0)),
        "{last:?}"
    );
    // Neither end is drawn over the frame.
    assert!(line[0].0 > LEFT + 5.0 && last.0 < LEFT + PLOT_WIDTH - 5.0);
    // The slowest sample is alone at the top: the line runs right to it just below 1.
    let before = line[line.len() - 2];
    assert!(near(before.0, px(&x, 10_000.0)), "{before:?}");
    assert!(line[line.len() - 3].0 < before.0 - 50.0);
}

#[test]
fn the_legend_gives_each_series_p50_and_p99_with_the_unit() {
    let samples: Vec<f64> = (1..=100).rev().map(f64::from).collect();
    let doc = cdf(&plot(vec![("a", samples)]));
    assert!(doc.contains(">51.0 / 99.0 µs <tspan"), "{doc}");
    assert!(doc.contains("(n = 100)"));
}

#[test]
fn edge_cases_draw_without_panicking() {
    let no_series = cdf(&plot(vec![]));
    check_xml(&no_series).unwrap();
    assert!(polylines(&no_series).is_empty());
    assert!(texts(&no_series).contains(&"no samples"));
    let cases: [(&[f64], usize); 7] = [
        (&[], 0),
        (&[3.0], 1),
        (&[7.0; 50], 1),
        (&[0.0; 5], 1),
        (&[f64::NAN, f64::INFINITY], 0),
        (&[f64::NAN, 1.0, -2.0, 0.0, 5_000.0], 1),
        (&[-3.0, -1.0], 1),
    ];
    for (samples, lines) in cases {
        let doc = cdf(&plot(vec![("series", samples.to_vec())]));
        check_xml(&doc).unwrap_or_else(|e| panic!("{samples:?}: {e}"));
        assert_eq!(polylines(&doc).len(), lines, "{samples:?}");
        for line in polylines(&doc) {
            for (x, y) in line {
                assert!(x.is_finite() && y.is_finite(), "{samples:?}");
            }
        }
    }
}

#[test]
fn zero_and_negative_samples_sit_at_the_smallest_positive_one_on_a_log_axis() {
    let samples = vec![0.0, -5.0, 3.0, 1_000.0];
    let doc = cdf(&plot(vec![("a", samples.clone())]));
    let x = x_axis(&[Series {
        name: "a",
        sorted: samples,
    }]);
    assert_eq!(x.lo, 2.0);
    let line = &polylines(&doc)[0];
    assert!(line[0].0 > LEFT + 1.0);
    assert!(near(line[0].0, px(&x, 3.0)));
}

#[test]
fn the_slowest_percent_gets_room_at_the_top() {
    assert_eq!(py(0.0), TOP + PLOT_HEIGHT);
    assert_eq!(py(1.0), TOP);
    assert!(py(0.99) - py(1.0) >= 40.0);
    assert!(py(0.9) - py(0.99) >= 60.0);
    let rows: Vec<f64> = (0..=1000).map(|i| py(f64::from(i) / 1000.0)).collect();
    assert!(
        rows.windows(2).all(|w| w[1] < w[0]),
        "the rows do not rise with the fraction"
    );
}

#[test]
fn figures_are_short() {
    assert_eq!(short(0.234), "0.23");
    assert_eq!(short(0.0234), "0.023");
    assert_eq!(short(2.14), "2.1");
    assert_eq!(short(18.0), "18.0");
    assert_eq!(short(465.4), "465");
    assert_eq!(short(5_052.0), "5,052");
    assert_eq!(short(0.0), "0");
}
