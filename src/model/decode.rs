//! The decoding toolkit: turns a parsed `serde_json::Value` into typed records while keeping the
//! JSON path of where it is, and collects *every* problem instead of stopping at the first.
//!
//! Each record's decoder (declared with the record by `records`' `record!` macro) reads its fields
//! through an [`Obj`] in the order of the record's declared fields, each by the rule its type picks
//! (`Field`); whatever the file has beyond them is returned by [`Obj::finish`] as the record's
//! extras, in file order. A decoder returns `None` when the record had an error; the errors
//! themselves are in the [`Diag`].

use serde_json::{Map, Number, Value};

use crate::problem::{clipped, quoted, Severity};

/// A content problem at a JSON path, before it is tied to a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Finding {
    pub(crate) severity: Severity,
    pub(crate) path: String,
    pub(crate) message: String,
}

/// The problems found while decoding one file.
#[derive(Debug, Default)]
pub(crate) struct Diag {
    pub(crate) findings: Vec<Finding>,
}

impl Diag {
    pub(crate) fn error(&mut self, path: &str, message: impl Into<String>) {
        self.push(Severity::Error, path, message.into());
    }

    pub(crate) fn warning(&mut self, path: &str, message: impl Into<String>) {
        self.push(Severity::Warning, path, message.into());
    }

    /// Whether any finding is an error.
    pub(crate) fn has_errors(&self) -> bool {
        self.findings.iter().any(|f| f.severity == Severity::Error)
    }

    /// The errors, as `path: message`.
    pub(crate) fn errors(&self) -> Vec<String> {
        self.findings
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .map(|f| match f.path.as_str() {
                "" => f.message.clone(),
                path => format!("{path}: {}", f.message),
            })
            .collect()
    }

    /// Each finding as `path: message`, for tests.
    #[cfg(test)]
    pub(crate) fn lines(&self) -> Vec<String> {
        self.findings
            .iter()
            .map(|f| format!("{}: {}", f.path, f.message))
            .collect()
    }

    fn push(&mut self, severity: Severity, path: &str, message: String) {
        self.findings.push(Finding {
            severity,
            path: path.to_string(),
            message,
        });
    }
}

/// `parent.key`, or `key` at the root.
pub(crate) fn join_key(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

/// `parent[index]`.
pub(crate) fn join_index(parent: &str, index: usize) -> String {
    format!("{parent}[{index}]")
}

/// A short description of a value for "expected X, found Y" messages.
pub(crate) fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("{b}"),
        // Numbers keep their text: one out of range is said to be (it read as a type error).
        Value::Number(n) => {
            let text = n.to_string();
            let shown = clipped(&text);
            if text.parse::<f64>().is_ok_and(f64::is_infinite) {
                format!("the number {shown}, beyond a double's range (clients read it as Infinity)")
            } else if !n.is_i64() && is_integer_text(&text) {
                // Unsigned fields take up to 2^64 - 1: one past that is beyond either kind.
                match n.is_u64() {
                    true => format!("the number {shown}, beyond a signed 64-bit integer"),
                    false => format!("the number {shown}, beyond a 64-bit integer"),
                }
            } else {
                format!("the number {shown}")
            }
        }
        Value::String(s) => format!("the string {}", quoted(s)),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
    }
}

/// Whether `text` is written as an integer: digits, maybe after a minus.
fn is_integer_text(text: &str) -> bool {
    let digits = text.strip_prefix('-').unwrap_or(text);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// A text value with a validated format (a date, an hour, a decimal in text...).
pub(crate) trait TextFormat: Sized {
    /// Checks `text`; the error says what was wrong, quoting the text.
    fn parse(text: &str) -> Result<Self, String>;
}

/// Decodes one item of a list; `path` is the item's own path.
pub(crate) type ItemDecoder<T> = fn(&Value, &str, &mut Diag) -> Option<T>;

/// A record type: an object decoded field by field. The `record!` macro of `records` implements
/// it from the same field list that declares the struct.
pub(crate) trait Record: Sized {
    /// Decodes `v` (found at `path`), reporting every problem into `diag`.
    fn decode(v: &Value, path: &str, diag: &mut Diag) -> Option<Self>;
    /// The record's name in the docs (its type's name).
    #[cfg(test)]
    const NAME: &'static str;
    /// Its fields in served order, from the same list that declares the struct and its decoder:
    /// docs/bundles.md is generated from them (`model::fielddoc`).
    #[cfg(test)]
    const FIELDS: &'static [FieldDoc];
}

/// One field of a record, as docs/bundles.md describes it.
#[cfg(test)]
#[derive(Debug)]
pub(crate) struct FieldDoc {
    /// The key in the file (and on the wire).
    pub key: &'static str,
    /// Its type, as a reader reads it.
    pub ty: fn() -> Ty,
    pub presence: Presence,
}

/// Whether a field must be in the file.
#[cfg(test)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Presence {
    /// Present, and never `null`.
    Required,
    /// May be `null` or left out; served as `null` then.
    Nullable,
    /// May be left out, and is then not served; `null` is an error.
    Optional,
}

/// A field's type for the docs.
#[cfg(test)]
#[derive(Debug, Clone)]
pub(crate) enum Ty {
    /// A JSON value of one kind: its description and an example written as JSON.
    Plain {
        what: &'static str,
        example: &'static str,
    },
    /// A nested record.
    Record {
        name: &'static str,
        fields: &'static [FieldDoc],
    },
    /// A list of records.
    List(Box<Ty>),
    /// A text format, or `""`.
    OrEmpty(Box<Ty>),
}

/// The docs' description of a field type; implemented next to each [`Field`] rule.
#[cfg(test)]
pub(crate) trait Describe {
    fn ty() -> Ty;
    /// `Option<T>`: the field may be `null` or left out.
    const NULLABLE: bool = false;
}

#[cfg(test)]
impl<R: Record> Describe for R {
    fn ty() -> Ty {
        Ty::Record {
            name: R::NAME,
            fields: R::FIELDS,
        }
    }
}

#[cfg(test)]
impl<T: Describe> Describe for Option<T> {
    fn ty() -> Ty {
        T::ty()
    }
    const NULLABLE: bool = true;
}

#[cfg(test)]
impl<R: Record> Describe for Vec<R> {
    fn ty() -> Ty {
        Ty::List(Box::new(R::ty()))
    }
}

/// Implements [`Describe`] for a plain type.
#[cfg(test)]
macro_rules! describe_plain {
    ($($t:ty => $what:literal, $example:literal;)*) => {$(
        impl $crate::model::decode::Describe for $t {
            fn ty() -> $crate::model::decode::Ty {
                $crate::model::decode::Ty::Plain { what: $what, example: $example }
            }
        }
    )*};
}
#[cfg(test)]
pub(crate) use describe_plain;

#[cfg(test)]
describe_plain! {
    String => "string", "\"text\"";
    i64 => "integer", "1";
    Number => "number, served as written", "10.00";
    bool => "boolean", "true";
}

/// How a field is read from its object; the field's type picks the rule: a plain type is
/// required, `Option<T>` may be `null` or left out (served as `null`), a [`Record`] is a nested
/// object, `Vec<R>` a required list of records, a [`TextFormat`] a required string in that format.
pub(crate) trait Field: Sized {
    fn read(o: &mut Obj<'_, '_>, key: &'static str) -> Option<Self>;
}

/// A field that may be left out, and then is not served either; `null` is a type error.
pub(crate) trait Omittable: Sized {
    fn read_omittable(o: &mut Obj<'_, '_>, key: &'static str) -> Option<Self>;
}

/// One JSON kind of value: how it is taken out of a `Value`, and its name in messages.
pub(crate) trait Scalar: Sized {
    /// What a message says was expected: "a string", "an integer"...
    const EXPECTED: &'static str;
    fn take(v: &Value) -> Option<Self>;
}

impl Scalar for String {
    const EXPECTED: &'static str = "a string";
    fn take(v: &Value) -> Option<Self> {
        v.as_str().map(str::to_string)
    }
}

impl Scalar for i64 {
    const EXPECTED: &'static str = "an integer";
    fn take(v: &Value) -> Option<Self> {
        v.as_number().filter(|n| n.is_i64())?.as_i64()
    }
}

impl Scalar for Number {
    const EXPECTED: &'static str = "a number";
    /// Served as written, but only one a double holds: `1e400` would be `Infinity` to every
    /// JavaScript or Python client, and TOML's `inf` is refused too.
    fn take(v: &Value) -> Option<Self> {
        // `as_f64` is `None` for one beyond a double (numbers keep their text here).
        v.as_number().filter(|n| n.as_f64().is_some()).cloned()
    }
}

impl Scalar for bool {
    const EXPECTED: &'static str = "true or false";
    fn take(v: &Value) -> Option<Self> {
        v.as_bool()
    }
}

macro_rules! scalar_fields {
    ($($t:ty),*) => {$(
        impl Field for $t {
            fn read(o: &mut Obj<'_, '_>, key: &'static str) -> Option<Self> {
                o.required(key)
            }
        }

        impl Field for Option<$t> {
            fn read(o: &mut Obj<'_, '_>, key: &'static str) -> Option<Self> {
                o.nullable(key)
            }
        }

        impl Omittable for Option<$t> {
            fn read_omittable(o: &mut Obj<'_, '_>, key: &'static str) -> Option<Self> {
                o.optional(key)
            }
        }
    )*};
}

scalar_fields!(String, i64, Number, bool);

impl<R: Record> Field for Vec<R> {
    fn read(o: &mut Obj<'_, '_>, key: &'static str) -> Option<Self> {
        o.list(key, R::decode)
    }
}

/// A record nested in a record: a required object.
impl<R: Record> Field for R {
    fn read(o: &mut Obj<'_, '_>, key: &'static str) -> Option<Self> {
        let v = o.present(key)?;
        let path = o.path_of(key);
        R::decode(v, &path, o.diag)
    }
}

/// A nested record that may be `null` or left out (served as `null`).
impl<R: Record> Field for Option<R> {
    fn read(o: &mut Obj<'_, '_>, key: &'static str) -> Option<Self> {
        match o.raw(key) {
            None | Some(Value::Null) => Some(None),
            Some(v) => {
                let path = o.path_of(key);
                R::decode(v, &path, o.diag).map(Some)
            }
        }
    }
}

/// A JSON object being decoded field by field.
pub(crate) struct Obj<'v, 'd> {
    map: &'v Map<String, Value>,
    path: String,
    diag: &'d mut Diag,
    read: Vec<&'static str>,
}

impl<'v, 'd> Obj<'v, 'd> {
    /// Starts decoding `v` as an object; an error (and `None`) if it is something else.
    pub(crate) fn new(v: &'v Value, path: &str, diag: &'d mut Diag) -> Option<Self> {
        match v {
            Value::Object(map) => Some(Obj {
                map,
                path: path.to_string(),
                diag,
                read: Vec::new(),
            }),
            other => {
                diag.error(path, expected("an object", path, &describe(other)));
                None
            }
        }
    }

    /// The diagnostics this object reports into, for cross-field checks.
    pub(crate) fn diag(&mut self) -> &mut Diag {
        self.diag
    }

    /// The path of a field of this object.
    pub(crate) fn path_of(&self, key: &str) -> String {
        join_key(&self.path, key)
    }

    /// The raw value of a field, if present (marks it as known).
    pub(crate) fn raw(&mut self, key: &'static str) -> Option<&'v Value> {
        self.read.push(key);
        self.map.get(key)
    }

    /// The raw value of a field that must be present.
    fn present(&mut self, key: &'static str) -> Option<&'v Value> {
        let v = self.raw(key);
        if v.is_none() {
            let path = self.path_of(key);
            self.diag.error(&path, "missing required field");
        }
        v
    }

    /// `v` as a `T`, or a type error at `key`.
    fn take<T: Scalar>(&mut self, key: &'static str, v: &'v Value) -> Option<T> {
        let t = T::take(v);
        if t.is_none() {
            let path = self.path_of(key);
            self.diag.error(
                &path,
                format!("expected {}, found {}", T::EXPECTED, describe(v)),
            );
        }
        t
    }

    /// A required field of one kind: a string, an integer, a number (kept exactly as written) or
    /// a boolean.
    pub(crate) fn required<T: Scalar>(&mut self, key: &'static str) -> Option<T> {
        let v = self.present(key)?;
        self.take(key, v)
    }

    /// A field that may be `null` or left out (served as `null`).
    pub(crate) fn nullable<T: Scalar>(&mut self, key: &'static str) -> Option<Option<T>> {
        match self.raw(key) {
            None | Some(Value::Null) => Some(None),
            Some(v) => self.take(key, v).map(Some),
        }
    }

    /// A field that may be left out (then it is not served either); `null` is a type error.
    pub(crate) fn optional<T: Scalar>(&mut self, key: &'static str) -> Option<Option<T>> {
        match self.raw(key) {
            None => Some(None),
            Some(v) => self.take(key, v).map(Some),
        }
    }

    /// A required string in a validated format.
    pub(crate) fn text<T: TextFormat>(&mut self, key: &'static str) -> Option<T> {
        let s: String = self.required(key)?;
        match T::parse(&s) {
            Ok(t) => Some(t),
            Err(message) => {
                let path = self.path_of(key);
                self.diag.error(&path, message);
                None
            }
        }
    }

    /// A required array whose items are decoded by `item`. `None` if any item had an error.
    pub(crate) fn list<T>(&mut self, key: &'static str, item: ItemDecoder<T>) -> Option<Vec<T>> {
        let v = self.present(key)?;
        let path = self.path_of(key);
        decode_array(v, &path, self.diag, item)
    }

    /// Ends the object: the fields not read by the decoder, in file order. One that looks like
    /// a slip for a field the object lacks ([`slip_for`]) is a warning: it is served as it is,
    /// and the field it meant is null or missing (`descripton` beside no `description`).
    pub(crate) fn finish(self) -> Map<String, Value> {
        for k in self.map.keys().filter(|k| !self.read.contains(&k.as_str())) {
            let absent = self.read.iter().filter(|r| !self.map.contains_key(**r));
            if let Some(meant) = slip_for(k, absent.copied()) {
                self.diag.warning(
                    &join_key(&self.path, k),
                    format!("{SLIP} did you mean {meant:?}, which this record lacks?"),
                );
            }
        }
        self.rest()
    }

    /// Ends the object: the fields not read by the decoder, in file order, and no word on them
    /// (for a decoder that says its own of every unknown key, as bundle.toml's).
    pub(crate) fn rest(self) -> Map<String, Value> {
        self.map
            .iter()
            .filter(|(k, _)| !self.read.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

/// How the warning of [`Obj::finish`] for a misspelt field begins (a file's are said once per
/// field, `load::Loader`).
pub(crate) const SLIP: &str = "unknown field, served as it is;";

/// The field of `absent` that `key` is most likely a misspelling of: at most two edits away
/// (a letter left out, added, changed or two swapped; case ignored), and fewer than half the
/// field's length (a short name only by case or one letter), the nearest first. Looser
/// than the "did you mean" of names eventbox is given ([`crate::problem::closest`]): a record may
/// hold fields of its own beside the documented ones (`checkin_date` is no slip for an absent
/// `checkin`), so only a near miss is said.
fn slip_for<'k>(key: &str, absent: impl Iterator<Item = &'k str>) -> Option<&'k str> {
    let key = key.to_ascii_lowercase();
    absent
        .filter(|known| known.len().abs_diff(key.len()) <= 2)
        .map(|known| (strsim::damerau_levenshtein(&key, known), known))
        .filter(|&(edits, known)| edits <= 2 && edits < known.len() / 2)
        .min_by_key(|&(edits, _)| edits)
        .map(|(_, known)| known)
}

/// Decodes every item of an array (reporting the problems of all of them).
pub(crate) fn decode_array<T>(
    v: &Value,
    path: &str,
    diag: &mut Diag,
    item: ItemDecoder<T>,
) -> Option<Vec<T>> {
    let Value::Array(items) = v else {
        diag.error(path, expected("an array", path, &describe(v)));
        return None;
    };
    let mut out = Vec::with_capacity(items.len());
    let mut ok = true;
    for (i, it) in items.iter().enumerate() {
        match item(it, &join_index(path, i), diag) {
            Some(t) => out.push(t),
            None => ok = false,
        }
    }
    ok.then_some(out)
}

/// The message for a value of the wrong kind: `expected an array at data, found an object`
/// (`at the top level` for the file's or body's root).
pub(crate) fn expected(what: &str, path: &str, found: &str) -> String {
    let at = if path.is_empty() {
        "the top level"
    } else {
        path
    };
    format!("expected {what} at {at}, found {found}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn collects_every_problem_with_paths() {
        let v = json!({"a": "x", "b": 1.5, "c": null, "z": 1});
        let mut diag = Diag::default();
        let mut o = Obj::new(&v, "data[2]", &mut diag).expect("an object");
        assert_eq!(o.required::<String>("a").as_deref(), Some("x"));
        assert_eq!(o.required::<i64>("b"), None);
        assert_eq!(o.required::<String>("c"), None);
        assert_eq!(o.required::<String>("missing"), None);
        assert_eq!(o.nullable::<String>("c"), Some(None));
        let extra = o.finish();
        assert_eq!(extra.keys().collect::<Vec<_>>(), vec!["z"]);
        assert_eq!(
            diag.lines(),
            vec![
                "data[2].b: expected an integer, found the number 1.5",
                "data[2].c: expected a string, found null",
                "data[2].missing: missing required field",
            ]
        );
    }

    /// A number out of range says so: an integer beyond 64 bits for an integer field, one beyond
    /// a double's range for a number field (served as written, it was `Infinity` to a client).
    #[test]
    fn a_number_out_of_range_is_said_to_be() {
        let v: Value = serde_json::from_str(
            r#"{"id": 99999999999999999999999, "price": 1e400, "small": -1e-400, "big": 1e300,
                "just": 9223372036854775808}"#,
        )
        .expect("JSON");
        let mut diag = Diag::default();
        let mut o = Obj::new(&v, "data[0]", &mut diag).expect("an object");
        assert_eq!(o.required::<i64>("id"), None);
        assert_eq!(o.required::<Number>("price"), None);
        assert!(
            o.required::<Number>("small").is_some(),
            "underflows to 0: a double holds it"
        );
        assert!(o.required::<Number>("big").is_some());
        assert_eq!(o.required::<i64>("just"), None);
        assert_eq!(
            diag.lines(),
            vec![
                "data[0].id: expected an integer, found the number 99999999999999999999999, beyond a 64-bit integer",
                "data[0].price: expected a number, found the number 1e+400, beyond a double's range (clients read it as Infinity)",
                "data[0].just: expected an integer, found the number 9223372036854775808, beyond a signed 64-bit integer",
            ]
        );
    }

    /// A field that looks like a slip for one the record lacks is served, with a warning
    /// naming the field meant; fields of the record's own that are no near miss of an absent
    /// one, or are beside the field they look like, are not.
    #[test]
    fn a_misspelt_field_is_a_warning_naming_the_field_meant() {
        let v = json!({"title": "T", "descripton": "typo", "Venu": "Sala 1",
            "checkin_date": "x", "titles": ["kept"], "idx": 1});
        let mut diag = Diag::default();
        let mut o = Obj::new(&v, "data[0]", &mut diag).expect("an object");
        assert_eq!(o.required::<String>("title").as_deref(), Some("T"));
        assert_eq!(o.nullable::<String>("description"), Some(None));
        assert_eq!(o.nullable::<String>("venue"), Some(None));
        assert_eq!(o.nullable::<String>("checkin"), Some(None));
        assert_eq!(o.nullable::<i64>("id"), Some(None));
        let extra = o.finish();
        assert_eq!(
            extra.keys().collect::<Vec<_>>(),
            ["descripton", "Venu", "checkin_date", "titles", "idx"]
        );
        assert_eq!(
            diag.lines(),
            [
                "data[0].descripton: unknown field, served as it is; did you mean \"description\", which this record lacks?",
                "data[0].Venu: unknown field, served as it is; did you mean \"venue\", which this record lacks?",
            ]
        );
        assert!(diag
            .findings
            .iter()
            .all(|f| f.severity == Severity::Warning));
    }

    #[test]
    fn arrays_report_items_by_index() {
        let v = json!([1, "two", 3]);
        let mut diag = Diag::default();
        let int_item: ItemDecoder<i64> = |v, path, diag| match v.as_i64() {
            Some(i) => Some(i),
            None => {
                diag.error(path, "not an int");
                None
            }
        };
        assert_eq!(decode_array(&v, "data", &mut diag, int_item), None);
        assert_eq!(diag.findings[0].path, "data[1]");
    }
}
