//! Cancel-latency CDF plots as self-contained SVG (to be written).

use super::Cdf;

/// The plot of `cdf` as an SVG document.
pub fn cdf(cdf: &Cdf) -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\"><title>{}</title></svg>",
        cdf.title
    )
}
