//! DNS-rebinding protection for an MCP server over HTTP, as Streamable HTTP requires: a request
//! whose `Origin` is present and not allowed is refused (403).
//!
//! A web page can make a browser send requests to a server on the user's machine. Two checks
//! stop it:
//! - **Origin.** Browsers name the page's origin on cross-origin requests and on every POST. A
//!   request without `Origin` (any non-browser client) passes; one from a loopback origin
//!   (`localhost`, `*.localhost`, `127.0.0.0/8`, `[::1]`, any scheme and port) passes; any other
//!   must be allowed by name ([`OriginPolicy::allow_origin`]); `null` never passes.
//! - **Host**, for a server bound to loopback ([`OriginPolicy::loopback_hosts`]): after a
//!   rebinding the page's requests are same-origin, and a same-origin GET may carry no
//!   `Origin`, but its `Host` still names the attacker's domain. Such a server accepts only
//!   loopback hosts and those allowed by name ([`OriginPolicy::allow_host`]).
//!
//! ```
//! use cancelkit_wire::origin::OriginPolicy;
//!
//! let policy = OriginPolicy::new()
//!     .loopback_hosts()
//!     .allow_origin("https://inspector.example.com")
//!     .unwrap();
//! assert!(policy.check(None, Some(b"127.0.0.1:4444")).is_ok());
//! assert!(policy.check(Some(b"http://localhost:6274"), Some(b"localhost:4444")).is_ok());
//! assert!(policy.check(Some(b"https://inspector.example.com"), Some(b"127.0.0.1")).is_ok());
//! assert!(policy.check(Some(b"http://evil.example"), Some(b"127.0.0.1:4444")).is_err());
//! assert!(policy.check(None, Some(b"evil.example:4444")).is_err());
//! ```

use std::net::IpAddr;

/// Which origins and hosts a server accepts; see the [module documentation](self).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OriginPolicy {
    /// Origins allowed beside the loopback ones, as `scheme://host[:port]` in lower case with
    /// the scheme's default port left out.
    origins: Vec<String>,
    /// `Some`: only loopback hosts and these (lower case, without port) are accepted.
    hosts: Option<Vec<String>>,
}

/// An origin or host given to the policy that cannot be one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not an origin (`scheme://host[:port]`, such as `https://app.example.com`)")]
pub struct BadOrigin(pub String);

/// Why a request was refused: answer it with 403 and this text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// Its `Origin` is neither loopback nor allowed.
    #[error("Forbidden: the origin `{0}` is not allowed (DNS rebinding protection)")]
    Origin(String),
    /// Its `Host` is neither loopback nor allowed, on a server bound to loopback.
    #[error("Forbidden: the host `{0}` is not allowed (DNS rebinding protection)")]
    Host(String),
}

impl OriginPolicy {
    /// Loopback origins only; hosts are not checked.
    pub fn new() -> OriginPolicy {
        OriginPolicy::default()
    }

    /// Accepts requests from `origin` too.
    ///
    /// # Errors
    ///
    /// `origin` is not `scheme://host[:port]`.
    pub fn allow_origin(mut self, origin: &str) -> Result<OriginPolicy, BadOrigin> {
        let parsed = Origin::parse(origin).ok_or_else(|| BadOrigin(origin.to_owned()))?;
        self.origins.push(parsed.normalized());
        Ok(self)
    }

    /// Checks `Host` too, accepting loopback hosts only (and those of
    /// [`allow_host`](Self::allow_host)): for a server bound to a loopback address.
    pub fn loopback_hosts(mut self) -> OriginPolicy {
        self.hosts.get_or_insert_with(Vec::new);
        self
    }

    /// Accepts `Host: host` (any port) too, as a reverse proxy in front of a loopback-bound
    /// server sends it; turns the host check on.
    pub fn allow_host(mut self, host: &str) -> OriginPolicy {
        let host = strip_port(host.trim()).to_ascii_lowercase();
        self.hosts.get_or_insert_with(Vec::new).push(host);
        self
    }

    /// Checks a request's `Origin` and `Host` header values.
    pub fn check(&self, origin: Option<&[u8]>, host: Option<&[u8]>) -> Result<(), Refused> {
        if let Some(hosts) = &self.hosts {
            let text = host.map(String::from_utf8_lossy).unwrap_or_default();
            let name = strip_port(text.trim()).to_ascii_lowercase();
            if !(is_loopback(&name) || hosts.contains(&name)) {
                return Err(Refused::Host(text.into_owned()));
            }
        }
        let Some(origin) = origin else {
            return Ok(());
        };
        let text = String::from_utf8_lossy(origin);
        let allowed = Origin::parse(&text)
            .is_some_and(|o| is_loopback(&o.host) || self.origins.contains(&o.normalized()));
        if allowed {
            Ok(())
        } else {
            Err(Refused::Origin(text.into_owned()))
        }
    }
}

/// `scheme://host[:port]`, parsed.
struct Origin {
    scheme: String,
    host: String,
    port: Option<u16>,
}

impl Origin {
    fn parse(text: &str) -> Option<Origin> {
        let (scheme, rest) = text.trim().split_once("://")?;
        let valid_scheme = !scheme.is_empty()
            && scheme
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b));
        if !valid_scheme || rest.is_empty() || rest.contains(['/', '?', '#', '@']) {
            return None;
        }
        let host = strip_port(rest);
        let port = match &rest[host.len()..] {
            "" => None,
            colon_port => Some(colon_port.strip_prefix(':')?.parse().ok()?),
        };
        let ipv6 = host.starts_with('[') && host.ends_with(']');
        let name = host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b));
        if host.is_empty() || !(ipv6 || name) {
            return None;
        }
        Some(Origin {
            scheme: scheme.to_ascii_lowercase(),
            host: host.to_ascii_lowercase(),
            port,
        })
    }

    fn normalized(&self) -> String {
        let default = match self.scheme.as_str() {
            "http" => Some(80),
            "https" => Some(443),
            _ => None,
        };
        match self.port.filter(|p| Some(*p) != default) {
            Some(port) => format!("{}://{}:{port}", self.scheme, self.host),
            None => format!("{}://{}", self.scheme, self.host),
        }
    }
}

/// `host` without a trailing `:port` (an IPv6 literal keeps its brackets).
fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        return match host.find(']') {
            Some(end) => &host[..=end],
            None => host,
        };
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

/// Whether a host name (lower case, without port) is the local machine.
fn is_loopback(host: &str) -> bool {
    if host == "localhost" || host.ends_with(".localhost") {
        return true;
    }
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_without_a_header_loopback_or_listed_pass() {
        let policy = OriginPolicy::new()
            .allow_origin("HTTPS://App.Example.com:443")
            .unwrap();
        for ok in [
            None,
            Some("http://localhost"),
            Some("http://localhost:6274"),
            Some("http://app.localhost:3000"),
            Some("http://127.0.0.1:8080"),
            Some("http://127.1.2.3"),
            Some("http://[::1]:9000"),
            Some("https://app.example.com"),
            Some("https://APP.example.com:443"),
        ] {
            assert_eq!(policy.check(ok.map(str::as_bytes), None), Ok(()), "{ok:?}");
        }
        for refused in [
            "null",
            "http://app.example.com",
            "https://app.example.com:8443",
            "https://evil.example",
            "http://localhost.evil.example",
            "http://127.0.0.1.evil.example",
            "file://",
            "not an origin",
            "http://user@localhost",
        ] {
            assert_eq!(
                policy.check(Some(refused.as_bytes()), None),
                Err(Refused::Origin(refused.into())),
                "{refused}"
            );
        }
    }

    #[test]
    fn hosts_are_checked_only_when_asked() {
        let open = OriginPolicy::new();
        assert_eq!(open.check(None, Some(b"evil.example")), Ok(()));
        assert_eq!(open.check(None, None), Ok(()));
        let local = OriginPolicy::new()
            .loopback_hosts()
            .allow_host("mcp.example.com:443");
        for ok in [
            "127.0.0.1:4444",
            "localhost",
            "LOCALHOST:80",
            "[::1]:4444",
            "mcp.example.com",
            "mcp.example.com:8443",
        ] {
            assert_eq!(local.check(None, Some(ok.as_bytes())), Ok(()), "{ok}");
        }
        for refused in ["evil.example:4444", "10.0.0.5", "[::2]:4444", ""] {
            assert_eq!(
                local.check(None, Some(refused.as_bytes())),
                Err(Refused::Host(refused.into())),
                "{refused}"
            );
        }
        assert_eq!(local.check(None, None), Err(Refused::Host(String::new())));
        // The host check comes first, and a good host does not excuse a bad origin.
        assert!(matches!(
            local.check(Some(b"http://evil.example"), Some(b"127.0.0.1")),
            Err(Refused::Origin(_))
        ));
    }

    #[test]
    fn bad_allowed_origins_are_refused() {
        for bad in [
            "example.com",
            "https://",
            "https://a.example/path",
            "https://a:port",
        ] {
            assert_eq!(
                OriginPolicy::new().allow_origin(bad),
                Err(BadOrigin(bad.into())),
                "{bad}"
            );
        }
    }
}
