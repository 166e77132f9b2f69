//! Keeping an HTTP upstream's credentials out of what the gateway says.
//!
//! An upstream `url` may carry a user and password (`https://user:pass@host/mcp`) and a token in
//! its query string (`?token=...`). The user and password are taken out of the URL before any
//! request is made and travel as an `Authorization: Basic` header instead (as reqwest itself
//! would send them), so the runtime's HTTP client never holds them. What is said about the
//! upstream in the gateway's log goes through [`UpstreamUrl::scrub`], which hides the password
//! and the query. Clients are never told the URL at all (see [`super::CallError::to_jsonrpc`]).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use reqwest::Url;
use reqwest::header::HeaderValue;

/// What stands in for a password, a query string or a secret found in a text.
pub const HIDDEN: &str = "***";

/// Secret pieces shorter than this are not searched for in free text (hiding every `a` of a
/// message would leave nothing to read); the URLs that carry them are replaced all the same.
const MIN_SECRET_LEN: usize = 3;

/// An upstream's URL: where requests go, the credentials it carried, and how to talk about it.
#[derive(Clone)]
pub struct UpstreamUrl {
    endpoint: Result<Url, String>,
    basic: Option<HeaderValue>,
    redacted: String,
    /// Spellings of the URL, longest first, replaced whole by `redacted`.
    spellings: Vec<String>,
    /// Secret pieces (the password, the query, its values), longest first, each replaced by
    /// [`HIDDEN`].
    secrets: Vec<String>,
}

impl std::fmt::Debug for UpstreamUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.redacted)
    }
}

impl UpstreamUrl {
    /// Splits `raw`. A URL that does not parse is kept as it is (requests to it fail) and is
    /// spoken of as `(an invalid URL)`.
    pub fn new(raw: &str) -> UpstreamUrl {
        let mut spellings = vec![raw.to_owned()];
        let mut secrets = Vec::new();
        let Ok(parsed) = Url::parse(raw) else {
            return UpstreamUrl {
                endpoint: Err("it does not parse as a URL".into()),
                basic: None,
                redacted: "(an invalid URL)".into(),
                spellings,
                secrets,
            };
        };
        spellings.push(parsed.as_str().to_owned());
        let mut shown = parsed.clone();
        let mut endpoint = parsed.clone();
        let mut basic = None;
        if !parsed.username().is_empty() || parsed.password().is_some() {
            let user = percent_decode(parsed.username());
            let password = parsed.password().map(percent_decode);
            if let Some(password) = parsed.password() {
                secrets.push(password.to_owned());
                secrets.push(percent_decode(password));
                let _ = shown.set_password(Some(HIDDEN));
            }
            basic = Some(basic_auth(&user, password.as_deref()));
            let _ = endpoint.set_username("");
            let _ = endpoint.set_password(None);
            spellings.push(endpoint.as_str().to_owned());
        }
        if let Some(query) = parsed.query() {
            secrets.push(query.to_owned());
            for pair in query.split('&') {
                let value = pair.split_once('=').map_or(pair, |(_, value)| value);
                secrets.push(value.to_owned());
                secrets.push(percent_decode(&value.replace('+', " ")));
            }
            shown.set_query(Some(HIDDEN));
        }
        let by_length = |a: &String, b: &String| b.len().cmp(&a.len()).then(a.cmp(b));
        spellings.sort_by(by_length);
        spellings.dedup();
        secrets.retain(|s| s.len() >= MIN_SECRET_LEN);
        secrets.sort_by(by_length);
        secrets.dedup();
        UpstreamUrl {
            endpoint: Ok(endpoint),
            basic,
            redacted: shown.as_str().to_owned(),
            spellings,
            secrets,
        }
    }

    /// The URL requests go to: without the user and password (or why there is none).
    pub fn endpoint(&self) -> Result<&Url, &str> {
        self.endpoint.as_ref().map_err(String::as_str)
    }

    /// `Authorization: Basic` for the user and password the URL carried, if it carried any.
    pub fn basic_auth(&self) -> Option<&HeaderValue> {
        self.basic.as_ref()
    }

    /// The URL as the log may show it: password and query replaced by [`HIDDEN`].
    pub fn redacted(&self) -> &str {
        &self.redacted
    }

    /// `text` with every spelling of the URL replaced by [`redacted`](Self::redacted), and
    /// every other occurrence of its password, its query or a query value by [`HIDDEN`].
    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for spelling in &self.spellings {
            if spelling != &self.redacted && out.contains(spelling.as_str()) {
                out = out.replace(spelling.as_str(), &self.redacted);
            }
        }
        // Keep the redacted URL intact while hiding stray secrets elsewhere.
        let pieces: Vec<&str> = out.split(self.redacted.as_str()).collect();
        let hidden: Vec<String> = pieces
            .into_iter()
            .map(|piece| {
                let mut piece = piece.to_owned();
                for secret in &self.secrets {
                    if piece.contains(secret.as_str()) {
                        piece = piece.replace(secret.as_str(), HIDDEN);
                    }
                }
                piece
            })
            .collect();
        hidden.join(&self.redacted)
    }
}

/// The `Authorization` value reqwest would send for `user:password` in a URL.
fn basic_auth(user: &str, password: Option<&str>) -> HeaderValue {
    let credentials = format!("{user}:{}", password.unwrap_or(""));
    let mut value = HeaderValue::try_from(format!("Basic {}", STANDARD.encode(credentials)))
        .expect("base64 is a valid header value");
    value.set_sensitive(true);
    value
}

/// `%XX` sequences decoded (an invalid one is kept as it is; bytes that are not UTF-8 are
/// replaced).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&hi), Some(&lo)) if hex(hi).is_some() && hex(lo).is_some() => {
                out.push((hex(hi).unwrap_or(0) * 16 + hex(lo).unwrap_or(0)) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_and_the_query_never_show() {
        let url = UpstreamUrl::new("http://bob:p%40ss-word@127.0.0.1:9/mcp?token=t0k-123&x=y");
        assert_eq!(url.redacted(), "http://bob:***@127.0.0.1:9/mcp?***");
        assert_eq!(
            url.endpoint().unwrap().as_str(),
            "http://127.0.0.1:9/mcp?token=t0k-123&x=y"
        );
        let said = url.scrub(
            "cannot reach http://127.0.0.1:9/mcp?token=t0k-123&x=y: error sending request for \
             url (http://bob:p%40ss-word@127.0.0.1:9/mcp?token=t0k-123&x=y); the server said \
             p@ss-word and t0k-123",
        );
        for secret in ["p%40ss-word", "p@ss-word", "t0k-123"] {
            assert!(!said.contains(secret), "{said}");
        }
        assert!(
            said.contains("http://bob:***@127.0.0.1:9/mcp?***"),
            "{said}"
        );
        assert!(said.ends_with("the server said *** and ***"), "{said}");
    }

    #[test]
    fn the_user_and_password_travel_as_basic_auth() {
        let url = UpstreamUrl::new("https://bob:p%40ss@example.com/mcp");
        // base64("bob:p@ss")
        assert_eq!(url.basic_auth().unwrap(), "Basic Ym9iOnBAc3M=");
        assert!(url.basic_auth().unwrap().is_sensitive());
        assert_eq!(url.endpoint().unwrap().as_str(), "https://example.com/mcp");
        let plain = UpstreamUrl::new("https://example.com/mcp");
        assert!(plain.basic_auth().is_none());
        assert_eq!(plain.redacted(), "https://example.com/mcp");
        assert_eq!(
            plain.scrub("at https://example.com/mcp"),
            "at https://example.com/mcp"
        );
    }

    #[test]
    fn an_invalid_url_is_not_repeated() {
        let url = UpstreamUrl::new("http://u:secret@h:99999/?token=abc");
        assert!(url.endpoint().is_err());
        assert_eq!(
            url.scrub("invalid URL `http://u:secret@h:99999/?token=abc`"),
            "invalid URL `(an invalid URL)`"
        );
    }
}
