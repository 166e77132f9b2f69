//! An error and its causes on one line, for messages and logs.

use std::error::Error;
use std::fmt;

/// Shows `error` followed by each of its sources, `: `-separated, skipping a source whose text
/// the line already holds (many errors repeat their cause in their own message).
///
/// ```
/// use cancelkit_wire::chain;
///
/// let io = std::io::Error::other("connection refused");
/// let outer = std::io::Error::new(std::io::ErrorKind::NotConnected, io);
/// assert_eq!(chain(&outer).to_string(), "connection refused");
/// ```
pub fn chain<'a>(error: &'a (dyn Error + 'static)) -> Chain<'a> {
    Chain(error)
}

/// The [`Display`](fmt::Display) of an error with its sources; see [`chain`].
#[derive(Clone, Copy)]
pub struct Chain<'a>(&'a (dyn Error + 'static));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut text = self.0.to_string();
        let mut source = self.0.source();
        while let Some(cause) = source {
            let more = cause.to_string();
            if !more.is_empty() && !text.contains(&more) {
                text.push_str(": ");
                text.push_str(&more);
            }
            source = cause.source();
        }
        f.write_str(&text)
    }
}

impl fmt::Debug for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<Layer>>);

    impl fmt::Display for Layer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
    }

    impl Error for Layer {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            self.1.as_deref().map(|l| l as &(dyn Error + 'static))
        }
    }

    #[test]
    fn sources_follow_and_repeats_are_dropped() {
        let error = Layer(
            "error sending request",
            Some(Box::new(Layer(
                "client error (Connect)",
                Some(Box::new(Layer(
                    "tcp connect error: Connection refused",
                    Some(Box::new(Layer("Connection refused", None))),
                ))),
            ))),
        );
        assert_eq!(
            chain(&error).to_string(),
            "error sending request: client error (Connect): tcp connect error: Connection refused"
        );
        assert_eq!(chain(&Layer("alone", None)).to_string(), "alone");
        assert_eq!(
            chain(&Layer("outer", Some(Box::new(Layer("", None))))).to_string(),
            "outer"
        );
    }
}
