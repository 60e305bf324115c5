//! Where `payments/details` finds its `reference`: the platform's docs put it in a GET's body, but
//! names no content type, and clients differ. First found wins: the query string
//! `?reference=...`, a JSON body `{"reference": "..."}` or the bare JSON string `"..."`, a form
//! body `reference=...` or `=...` (the two forms ASP.NET binds a lone `[FromBody] string` from).
//! An empty reference counts as absent. The name is matched ignoring ASCII case (`Reference`,
//! `REFERENCE`), as the service's framework binds parameters and JSON members (as `page` and
//! `per_page` are read, `paging.rs`); the first found wins.

/// The body is neither valid JSON nor a valid form.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct InvalidBody;

/// The `reference` of a query string, if any.
pub(crate) fn from_query(query: Option<&str>) -> Option<String> {
    form_value(query?.as_bytes())
}

fn form_value(bytes: &[u8]) -> Option<String> {
    form_pair(bytes, "reference")
}

/// The value of the first pair of a form named `name` (ASCII case ignored), if not empty.
fn form_pair(bytes: &[u8], name: &str) -> Option<String> {
    form_urlencoded::parse(bytes)
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.into_owned())
        .filter(|v| !v.is_empty())
}

/// The `reference` of a request body. A body is JSON when its content type says so, or, with no
/// content type or another one, when it starts with `{`, `[` or `"`. Otherwise it is a form, which
/// needs the form content type or none at all: `text/plain` or multipart are `InvalidBody`.
pub(crate) fn from_body(
    content_type: Option<&str>,
    body: &[u8],
) -> Result<Option<String>, InvalidBody> {
    let trimmed = crate::read::without_bom(body).trim_ascii();
    if trimmed.is_empty() {
        return Ok(None);
    }
    let looks_json = matches!(trimmed.first(), Some(b'{' | b'[' | b'"'));
    let (is_json, may_be_form) = match content_type {
        Some(ct) if super::router::is_json_type(ct) => (true, false),
        Some(ct)
            if ct.split(';').next().is_some_and(|m| {
                m.trim()
                    .eq_ignore_ascii_case("application/x-www-form-urlencoded")
            }) =>
        {
            (false, true)
        }
        None => (looks_json, true),
        Some(_) => (looks_json, false),
    };
    if is_json {
        let value = crate::read::parse_json(trimmed).map_err(|_| InvalidBody)?;
        let map = match value {
            serde_json::Value::Object(map) => map,
            serde_json::Value::String(s) => return Ok(Some(s).filter(|s| !s.is_empty())),
            _ => return Err(InvalidBody),
        };
        let member = map.get("reference").or_else(|| {
            map.iter()
                .find(|(k, _)| k.eq_ignore_ascii_case("reference"))
                .map(|(_, v)| v)
        });
        return match member {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(serde_json::Value::String(s)) if s.is_empty() => Ok(None),
            Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(InvalidBody),
        };
    }
    if !may_be_form {
        return Err(InvalidBody);
    }
    // A form: UTF-8 text of `name=value` pairs separated by `&`.
    let text = std::str::from_utf8(trimmed).map_err(|_| InvalidBody)?;
    if text
        .split('&')
        .any(|pair| !pair.is_empty() && !pair.contains('='))
    {
        return Err(InvalidBody);
    }
    Ok(form_value(trimmed).or_else(|| form_pair(trimmed, "")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query() {
        assert_eq!(
            from_query(Some("a=1&reference=AB%2012")),
            Some("AB 12".into())
        );
        assert_eq!(from_query(Some("reference=")), None);
        assert_eq!(from_query(Some("Reference=X1")), Some("X1".into()));
        assert_eq!(
            from_body(Some("application/json"), br#"{"REFERENCE":"X2"}"#),
            Ok(Some("X2".into()))
        );
        assert_eq!(from_body(None, b"reFerence=X3"), Ok(Some("X3".into())));
        assert_eq!(from_query(None), None);
    }

    #[test]
    fn bodies() {
        let json = Some("application/json");
        assert_eq!(
            from_body(json, br#"{"reference":"X1"}"#),
            Ok(Some("X1".into()))
        );
        assert_eq!(
            from_body(None, br#" {"reference":"X1"} "#),
            Ok(Some("X1".into()))
        );
        assert_eq!(from_body(json, br#"{"other":1}"#), Ok(None));
        assert_eq!(from_body(json, br#"{"reference":1}"#), Err(InvalidBody));
        assert_eq!(from_body(json, b"{nope"), Err(InvalidBody));
        assert_eq!(from_body(json, b"[1]"), Err(InvalidBody));
        let form = Some("application/x-www-form-urlencoded");
        assert_eq!(
            from_body(form, b"reference=X%2F1&x=2"),
            Ok(Some("X/1".into()))
        );
        assert_eq!(from_body(None, b"reference=X1"), Ok(Some("X1".into())));
        assert_eq!(from_body(Some("text/plain"), b"hello"), Err(InvalidBody));
        assert_eq!(
            from_body(Some("text/plain"), b"reference=X1"),
            Err(InvalidBody)
        );
        assert_eq!(
            from_body(Some("multipart/form-data; boundary=x"), b"--x\r\n"),
            Err(InvalidBody)
        );
        assert_eq!(
            from_body(Some("text/plain"), br#"{"reference":"X1"}"#),
            Ok(Some("X1".into()))
        );
        assert_eq!(from_body(form, b"\xff=1"), Err(InvalidBody));
        assert_eq!(from_body(None, b"  "), Ok(None));
    }

    /// The forms ASP.NET binds a lone `[FromBody] string` from, and what it reads as JSON.
    #[test]
    fn a_bare_string_a_nameless_pair_text_json_and_a_byte_order_mark() {
        let json = Some("application/json");
        assert_eq!(from_body(json, br#""X1""#), Ok(Some("X1".into())));
        assert_eq!(from_body(None, br#" "X1" "#), Ok(Some("X1".into())));
        assert_eq!(from_body(json, br#""""#), Ok(None));
        let form = Some("application/x-www-form-urlencoded");
        assert_eq!(from_body(form, b"=X%2F1"), Ok(Some("X/1".into())));
        assert_eq!(from_body(None, b"=X1"), Ok(Some("X1".into())));
        assert_eq!(
            from_body(form, b"=X1&reference=X2"),
            Ok(Some("X2".into())),
            "a named reference wins"
        );
        assert_eq!(
            from_body(Some("text/json; charset=utf-8"), br#"{"reference":"X3"}"#),
            Ok(Some("X3".into()))
        );
        assert_eq!(
            from_body(json, b"\xEF\xBB\xBF{\"reference\":\"X4\"}"),
            Ok(Some("X4".into()))
        );
        assert_eq!(from_body(json, b"12"), Err(InvalidBody));
    }
}
