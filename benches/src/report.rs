//! Printing a benchmark's table and saving it as JSON under `target/bench/`.

use std::path::PathBuf;

/// One row: a variant and its measurements.
pub struct Row {
    pub name: String,
    pub cells: Vec<String>,
}

/// Prints `rows` under `header` as an aligned table.
pub fn print_table(title: &str, header: &[&str], rows: &[Row]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    widths[0] = widths[0].max(rows.iter().map(|r| r.name.len()).max().unwrap_or(0));
    for row in rows {
        for (i, cell) in row.cells.iter().enumerate() {
            widths[i + 1] = widths[i + 1].max(cell.len());
        }
    }
    println!("\n{title}\n");
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i == 0 {
                out.push_str(&format!("| {:<w$} ", cell, w = widths[i]));
            } else {
                out.push_str(&format!("| {:>w$} ", cell, w = widths[i]));
            }
        }
        out.push('|');
        println!("{out}");
    };
    line(header.to_vec());
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    line(rule.iter().map(String::as_str).collect());
    for row in rows {
        let mut cells = vec![row.name.as_str()];
        cells.extend(row.cells.iter().map(String::as_str));
        line(cells);
    }
}

/// Writes `value` to `target/bench/<name>.json` and says where.
pub fn save_json(name: &str, value: &serde_json::Value) {
    let dir = target_dir().join("bench");
    let path = dir.join(format!("{name}.json"));
    let written = std::fs::create_dir_all(&dir).and_then(|()| {
        std::fs::write(
            &path,
            serde_json::to_string_pretty(value).unwrap_or_default(),
        )
    });
    match written {
        Ok(()) => println!("\nsaved {}", path.display()),
        Err(e) => eprintln!("\ncould not save {}: {e}", path.display()),
    }
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"))
}
