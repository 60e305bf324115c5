//! `Token`: the secret in `Authorization-Token` that opens one bundle, as `bundle.toml` names it
//! and as a request or `pull --token` gives it.
//!
//! Built once (from a header: trimmed, as the service trims it; from `bundle.toml` or the
//! command line: as written, for their own checks of white space), it never shows itself: `Debug` and
//! `Display` print its hint (`demo…`, see `token_hint`), so any struct holding
//! tokens can derive `Debug`. Equality runs in constant time (`subtle`), so comparing a guess
//! with a bundle's token tells nothing about how much of it was right; hashing (for the
//! token → bundle map) is ordinary. [`Token::expose`] is the one way to the text, for the few
//! places that must send or write it.

use std::fmt;
use std::hash::{Hash, Hasher};

use hyper::header::HeaderName;
use subtle::ConstantTimeEq;

/// The header that carries the token, in a request to eventbox or to a source. A `HeaderName`
/// rather than text: a lookup by text parses the name again on every request.
pub(crate) const TOKEN_HEADER: HeaderName = HeaderName::from_static("authorization-token");

/// The header that names the calling app (the company routes' key), when a client sends it.
pub(crate) const APP_HEADER: HeaderName = HeaderName::from_static("authorization-app");

/// A token cut to its first four characters, for logs and messages: a token is a secret. A
/// short token shows at most half of its characters, so no token is ever printed whole.
pub(crate) fn token_hint(token: &str) -> String {
    hint_of_head(&token_head(token))
}

/// The hint of a token whose head ([`token_head`]) is all that was kept (the request record).
pub(crate) fn hint_of_head(head: &str) -> String {
    format!("{head}…")
}

/// The part of a token [`token_hint`] shows, without the ellipsis (the request journal's
/// `token` field): the first four characters, at most half of a short token.
pub(crate) fn token_head(token: &str) -> String {
    let shown = (token.chars().count() / 2).min(4);
    token.chars().take(shown).collect()
}

/// A token. See the module's documentation.
#[derive(Clone, Default)]
pub struct Token(Box<str>);

/// The header's value is not UTF-8, so it names no bundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NotText;

impl Token {
    /// A token from text, as written (`bundle.toml` refuses white space around a token; `pull`
    /// trims its `--token`, `gen` refuses a padded one).
    pub fn new(text: &str) -> Token {
        Token(text.into())
    }

    /// The token a request header carries, borrowed (a request allocates nothing to look its
    /// bundle up): `Ok(None)` when the header is absent or blank.
    pub(crate) fn from_header(value: Option<&[u8]>) -> Result<Option<TokenRef<'_>>, NotText> {
        let bytes = value.unwrap_or_default().trim_ascii();
        if bytes.is_empty() {
            return Ok(None);
        }
        std::str::from_utf8(bytes)
            .map(|t| Some(TokenRef(t)))
            .map_err(|_| NotText)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The whole token: only for sending it (`pull`) or writing it (`bundle.toml`).
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether `text` (from a request) is this token: in constant time for texts of its length,
    /// as [`Token`]'s equality.
    pub(crate) fn matches(&self, text: &str) -> bool {
        self.0.as_bytes().ct_eq(text.as_bytes()).into()
    }

    /// Its first characters and an ellipsis, for messages and logs.
    pub fn hint(&self) -> String {
        token_hint(&self.0)
    }
}

impl PartialEq for Token {
    /// Constant time for tokens of one length (the length itself is not hidden).
    fn eq(&self, other: &Token) -> bool {
        self.0.as_bytes().ct_eq(other.0.as_bytes()).into()
    }
}

impl Eq for Token {}

impl Hash for Token {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.hash(state);
    }
}

/// A token borrowed from a request, to look a bundle up with: it hashes as [`Token`] does and
/// compares with one in constant time (hashbrown's `Equivalent`). `Debug` shows its hint, as
/// [`Token`]'s does.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct TokenRef<'a>(&'a str);

impl fmt::Debug for TokenRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TokenRef({})", token_hint(self.0))
    }
}

#[cfg(test)]
impl<'a> TokenRef<'a> {
    /// A borrowed token from text, as written.
    pub(crate) fn new(text: &'a str) -> TokenRef<'a> {
        TokenRef(text)
    }
}

impl Hash for TokenRef<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.hash(state);
    }
}

impl hashbrown::Equivalent<Token> for TokenRef<'_> {
    fn equivalent(&self, key: &Token) -> bool {
        self.0.as_bytes().ct_eq(key.0.as_bytes()).into()
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Token({})", self.hint())
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.hint())
    }
}

impl std::str::FromStr for Token {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Token, Self::Err> {
        Ok(Token::new(s))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    #[test]
    fn token_hint_keeps_four_characters() {
        assert_eq!(token_hint("demo-token"), "demo…");
        assert_eq!(token_hint("ção-secret"), "ção-…");
        assert_eq!(token_hint("ab"), "a…");
        assert_eq!(token_hint("demo"), "de…");
        assert_eq!(token_hint("x"), "…");
    }

    #[test]
    fn debug_and_display_show_only_the_hint() {
        let t = Token::new("secret-token-value");
        assert_eq!(format!("{t:?}"), "Token(secr…)");
        assert_eq!(t.to_string(), "secr…");
        assert_eq!(format!("{:?}", vec![t.clone()]), "[Token(secr…)]");
        let borrowed = TokenRef::new("secret-token-value");
        assert_eq!(format!("{:?}", Some(borrowed)), "Some(TokenRef(secr…))");
        assert_eq!(t.expose(), "secret-token-value");
        assert_eq!(token_head(t.expose()), "secr");
    }

    #[test]
    fn the_header_is_trimmed_and_blank_is_absent() {
        assert_eq!(Token::from_header(None), Ok(None));
        assert_eq!(Token::from_header(Some(b"  ")), Ok(None));
        assert_eq!(
            Token::from_header(Some(b" demo-token ")),
            Ok(Some(TokenRef::new("demo-token")))
        );
        assert_eq!(Token::from_header(Some(b"\xff\xfe")), Err(NotText));
    }

    #[test]
    fn a_borrowed_token_finds_its_token_in_the_snapshot_map_and_others_do_not() {
        let mut map: hashbrown::HashMap<Token, u8, std::hash::RandomState> =
            hashbrown::HashMap::default();
        map.insert(Token::new("demo-token"), 1);
        assert_eq!(map.get(&TokenRef::new("demo-token")), Some(&1));
        assert_eq!(map.get(&TokenRef::new("demo-tokem")), None);
        assert_eq!(map.get(&TokenRef::new("demo-toke")), None);
    }

    #[test]
    fn equal_tokens_find_each_other_in_a_map_and_others_do_not() {
        let mut map = HashMap::new();
        map.insert(Token::new("demo-token"), 1);
        assert_eq!(map.get(&Token::new("demo-token")), Some(&1));
        assert_eq!(map.get(&Token::new("demo-tokem")), None);
        assert_eq!(map.get(&Token::new("demo-toke")), None);
        assert_ne!(Token::new("a"), Token::new("b"));
    }
}
