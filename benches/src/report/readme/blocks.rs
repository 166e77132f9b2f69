//! One generated block of the README: everything between `<!-- KIND:NAME:begin -->` and
//! `<!-- KIND:NAME:end -->`, replaced as a whole. Used by `cargo xtask bench --readme` (kind
//! `bench`) and, included by path, by `cargo xtask survey --readme` (kind `survey`), so both
//! write their blocks the same way.

/// The markers around `name`'s block of `kind`.
pub fn markers(kind: &str, name: &str) -> (String, String) {
    (
        format!("<!-- {kind}:{name}:begin -->"),
        format!("<!-- {kind}:{name}:end -->"),
    )
}

/// Where `marker` is in `text`: an error if it is missing or there more than once.
fn find_once(text: &str, marker: &str) -> Result<usize, String> {
    let mut found = text.match_indices(marker).map(|(i, _)| i);
    match (found.next(), found.next()) {
        (Some(at), None) => Ok(at),
        (None, _) => Err(format!("the README has no `{marker}`")),
        (Some(_), Some(_)) => Err(format!("the README has `{marker}` more than once")),
    }
}

/// The range of `text` between the markers of `kind` block `name`.
pub fn block_range(text: &str, kind: &str, name: &str) -> Result<std::ops::Range<usize>, String> {
    let (begin, end) = markers(kind, name);
    let start = find_once(text, &begin)? + begin.len();
    let stop = find_once(text, &end)?;
    if stop < start {
        return Err(format!("the README has `{end}` before `{begin}`"));
    }
    Ok(start..stop)
}

/// `readme_text` with everything between the markers of `kind` block `name` replaced by `block` (set off by
/// blank lines). An error if either marker is missing or there twice, or if the end comes
/// before the begin.
pub fn splice(readme_text: &str, kind: &str, name: &str, block: &str) -> Result<String, String> {
    let range = block_range(readme_text, kind, name)?;
    let block = block.trim_matches('\n');
    let middle = if block.is_empty() {
        "\n".to_owned()
    } else {
        format!("\n\n{block}\n\n")
    };
    Ok(format!(
        "{}{middle}{}",
        &readme_text[..range.start],
        &readme_text[range.end..]
    ))
}
