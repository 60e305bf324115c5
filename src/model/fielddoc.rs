//! Generates the section of docs/bundles.md that lists every bundle file and the fields of its
//! records, from the same declarations the decoders use (`record!`'s `FIELDS`, the body
//! descriptions beside the body decoders, and [`crate::api::API`] for the files), with examples
//! taken from the demo bundle (data/demo). The test fails when the file differs and says how to
//! rewrite it: `EVENTBOX_BLESS=1 cargo test --lib bundles_md`.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::Value;

use super::bodies::{self, BodyDoc};
use super::decode::{FieldDoc, Presence, Ty};
use super::{parse_text, Format, BUNDLE_TOML_DOC};
use crate::api::{Feed, API};

const BEGIN: &str = "<!-- fields:begin -->";
const END: &str = "<!-- fields:end -->";

/// The longest example shown, in characters; longer ones are cut with `…`.
const EXAMPLE_MAX: usize = 40;

/// One bundle file: its name, whether it is required, what stands for it when absent, its body.
struct FileDoc {
    name: String,
    required: bool,
    absent: Option<String>,
    body: BodyDoc,
    /// The demo bundle's values of this file (several for a folder).
    demo: Vec<Value>,
}

/// The files of the demo bundle `demo` that feed `key` (parsed; JSON or TOML).
fn demo_values(demo: &Path, name: &str, folder: bool) -> Vec<Value> {
    let mut paths = Vec::new();
    if folder {
        if let Ok(dir) = std::fs::read_dir(demo.join(name)) {
            paths.extend(dir.filter_map(|e| e.ok().map(|e| e.path())));
        }
        paths.sort();
    } else {
        paths.push(demo.join(format!("{name}.json")));
        paths.push(demo.join(format!("{name}.toml")));
    }
    paths
        .iter()
        .filter_map(|p| {
            let format = Format::from_extension(p.extension()?.to_str()?)?;
            let text = std::fs::read_to_string(p).ok()?;
            let value = parse_text(&text, format);
            Some(value.unwrap_or_else(|e| panic!("{}: {e:?}", p.display())))
        })
        .collect()
}

/// Every bundle file, in the order of the endpoint table, `bundle.toml` first.
fn files(demo: &Path) -> Vec<FileDoc> {
    let mut out = vec![FileDoc {
        name: "bundle.toml".into(),
        required: true,
        absent: None,
        body: BUNDLE_TOML_DOC,
        demo: demo_values(demo, "bundle", false),
    }];
    for e in &API {
        let (name, required, absent, folder) = match e.feed {
            Feed::File(d) => {
                let absent = d.absent().map(|b| {
                    let json = b.to_json().expect("an absent body serialises");
                    String::from_utf8(json).expect("JSON is UTF-8")
                });
                let name = format!("{0}.json | {0}.toml", e.key);
                (name, absent.is_none(), absent, false)
            }
            Feed::Stream => {
                let name = format!("{0}.json | {0}.toml", e.key);
                (name, false, Some(r#"{"data":[],"count":0}"#.into()), false)
            }
            Feed::PerReference(_) => {
                let name = format!("{}/<reference>.json | .toml", e.key);
                (name, false, None, true)
            }
            Feed::Item { .. } | Feed::Derived { .. } | Feed::Write(_) | Feed::Server(_) => continue,
        };
        let body = bodies::doc(e.key)
            .unwrap_or_else(|| panic!("no bodies::doc for the bundle file {:?}", e.key));
        out.push(FileDoc {
            name,
            required,
            absent,
            body,
            demo: demo_values(demo, e.key, folder),
        });
    }
    out
}

/// A record reached from a file, with the first demo value of each field.
struct RecordDoc {
    name: &'static str,
    fields: &'static [FieldDoc],
    examples: Vec<Option<Value>>,
}

/// Adds `name` (and the records nested in it) to `records`, and fills in examples from `values`,
/// the demo's objects of that record.
fn visit(
    records: &mut Vec<RecordDoc>,
    name: &'static str,
    fields: &'static [FieldDoc],
    values: &[&Value],
) {
    let at = match records.iter().position(|r| r.name == name) {
        Some(at) => at,
        None => {
            records.push(RecordDoc {
                name,
                fields,
                examples: vec![None; fields.len()],
            });
            records.len() - 1
        }
    };
    for (i, f) in fields.iter().enumerate() {
        let found: Vec<&Value> = values.iter().filter_map(|v| v.get(f.key)).collect();
        if records[at].examples[i].is_none() {
            records[at].examples[i] = found.iter().find(|v| !v.is_null()).map(|v| (*v).clone());
        }
        match (f.ty)() {
            Ty::Record { name, fields } => visit(records, name, fields, &found),
            Ty::List(inner) => {
                if let Ty::Record { name, fields } = *inner {
                    let items: Vec<&Value> = found
                        .iter()
                        .filter_map(|v| v.as_array())
                        .flatten()
                        .collect();
                    visit(records, name, fields, &items);
                }
            }
            Ty::Plain { .. } | Ty::OrEmpty(_) => {}
        }
    }
}

/// The objects at `path` (`a.b`, each step a member; a list there gives its items).
fn at_path<'v>(v: &'v Value, path: &str) -> Vec<&'v Value> {
    let mut here = v;
    for step in path.split('.').filter(|s| !s.is_empty()) {
        match here.get(step) {
            Some(next) => here = next,
            None => return Vec::new(),
        }
    }
    match here {
        Value::Array(items) => items.iter().collect(),
        other => vec![other],
    }
}

/// The anchor GitHub gives a heading.
fn anchor(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn link(name: &str) -> String {
    format!("[{name}](#{})", anchor(name))
}

/// A type as a reader reads it.
fn type_text(ty: &Ty) -> String {
    match ty {
        Ty::Plain { what, .. } => (*what).to_string(),
        Ty::Record { name, .. } => format!("{} object", link(name)),
        Ty::List(inner) => match &**inner {
            Ty::Record { name, .. } => format!("list of {}", link(name)),
            other => format!("list of {}", type_text(other)),
        },
        Ty::OrEmpty(inner) => format!("{}, or `\"\"`", type_text(inner)),
    }
}

/// An example in backquotes, from the demo or else from the type; cut when long.
fn example_text(demo: Option<&Value>, ty: &Ty) -> String {
    let text = match (demo, ty) {
        (_, Ty::Record { name, .. }) => return format!("see {}", link(name)),
        (_, Ty::List(inner)) if matches!(**inner, Ty::Record { .. }) => {
            return "`[{…}, …]`".into();
        }
        (Some(v), _) => v.to_string(),
        (None, Ty::Plain { example, .. }) => (*example).to_string(),
        (None, Ty::OrEmpty(inner)) => return example_text(None, inner),
        (None, Ty::List(_)) => "[]".into(),
    };
    let short = if text.chars().count() > EXAMPLE_MAX {
        let cut: String = text.chars().take(EXAMPLE_MAX - 1).collect();
        format!("{cut}…")
    } else {
        text
    };
    assert!(!short.contains('`'), "an example with a backquote: {short}");
    format!("`{}`", short.replace('|', "\\|"))
}

fn presence_text(p: Presence) -> &'static str {
    match p {
        Presence::Required => "required",
        Presence::Nullable => "nullable",
        Presence::Optional => "optional",
    }
}

/// The generated section, markers included.
pub(crate) fn section(demo: &Path) -> String {
    let files = files(demo);
    let mut records: Vec<RecordDoc> = Vec::new();
    let mut s = String::new();
    let _ = writeln!(s, "{BEGIN}");
    let _ = writeln!(
        s,
        "<!-- Generated from src/model (the record! declarations and the body descriptions) and \
         the demo bundle: do not edit by hand; EVENTBOX_BLESS=1 cargo test --lib bundles_md \
         rewrites it. -->\n"
    );
    let _ = writeln!(s, "### Files\n");
    for f in &files {
        let kind = if f.required { "required" } else { "optional" };
        let _ = writeln!(s, "#### `{}` ({kind})\n", f.name);
        let _ = writeln!(s, "{}\n", f.body.holds);
        if let Some(absent) = &f.absent {
            let _ = writeln!(s, "When absent: `{absent}`.\n");
        }
        let mut names = Vec::new();
        for (path, ty) in f.body.records {
            let Ty::Record { name, fields } = ty() else {
                panic!("{}: records at {path:?} are not a record type", f.name);
            };
            let values: Vec<&Value> = f.demo.iter().flat_map(|v| at_path(v, path)).collect();
            assert!(
                !values.is_empty() || f.demo.is_empty(),
                "{}: the demo has no records at {path:?}: is the description right?",
                f.name
            );
            visit(&mut records, name, fields, &values);
            let at = if path.is_empty() {
                "the file".to_string()
            } else {
                format!("`{path}`")
            };
            names.push(format!("{at}: {}", link(name)));
        }
        let _ = writeln!(s, "Records: {}.\n", names.join("; "));
    }
    let _ = writeln!(s, "### Fields\n");
    for r in &records {
        let _ = writeln!(s, "#### {}\n", r.name);
        let _ = writeln!(s, "| Field | Type | Required | Example |");
        let _ = writeln!(s, "|---|---|---|---|");
        for (f, demo) in r.fields.iter().zip(&r.examples) {
            let ty = (f.ty)();
            let _ = writeln!(
                s,
                "| `{}` | {} | {} | {} |",
                f.key,
                type_text(&ty),
                presence_text(f.presence),
                example_text(demo.as_ref(), &ty)
            );
        }
        let _ = writeln!(s);
    }
    let _ = write!(s, "{END}");
    s
}

/// `text` with its generated section replaced by `section`; `None` without both markers.
fn replaced(text: &str, section: &str) -> Option<String> {
    let start = text.find(BEGIN)?;
    let end = text[start..].find(END)? + start + END.len();
    Some(format!("{}{section}{}", &text[..start], &text[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundles_md_lists_the_fields_as_declared() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let doc = root.join("docs/bundles.md");
        let text = std::fs::read_to_string(&doc).expect("docs/bundles.md");
        let want = replaced(&text, &section(&root.join("data/demo")))
            .unwrap_or_else(|| panic!("docs/bundles.md lacks the {BEGIN} ... {END} markers"));
        if want == text {
            return;
        }
        if std::env::var_os("EVENTBOX_BLESS").is_some() {
            std::fs::write(&doc, &want).expect("rewrite docs/bundles.md");
            return;
        }
        let first = text
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(text.lines().count().min(want.lines().count()));
        panic!(
            "docs/bundles.md's generated section differs from the declarations at line {}:\n  \
             file: {:?}\n  want: {:?}\n\
             Rewrite it with: EVENTBOX_BLESS=1 cargo test --lib bundles_md",
            first + 1,
            text.lines().nth(first).unwrap_or("(end)"),
            want.lines().nth(first).unwrap_or("(end)")
        );
    }

    #[test]
    fn the_section_follows_the_declarations_and_the_demo() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let s = section(&root.join("data/demo"));

        // Served order, a renamed key, each presence, a nested list and demo examples.
        assert!(
            s.contains("| `id_event` | integer | required | `48213` |"),
            "{s}"
        );
        assert!(s.contains("| `abstract` | string | required |"), "{s}");
        assert!(s.contains("| `banner` | string | nullable |"), "{s}");
        assert!(s.contains("| `titulo` | string | optional |"), "{s}");
        assert!(
            s.contains("| `tickets` | list of [Ticket](#ticket) | required |"),
            "{s}"
        );
        let event = s.find("| `id_event` |").expect("the event's first field");
        let tickets = s.find("| `tickets` |").expect("the event's last field");
        assert!(event < tickets, "fields out of served order");
        for r in [
            "Event",
            "Ticket",
            "TicketPrice",
            "Payment",
            "PaymentDetail",
            "Author",
        ] {
            assert!(s.contains(&format!("#### {r}\n")), "{r} missing:\n{s}");
        }
        // A record only the write bodies use is not a bundle file's.
        assert!(!s.contains("#### AttendeeCreate"), "{s}");
    }

    #[test]
    fn without_demo_values_the_declared_examples_are_used() {
        let empty = tempfile::tempdir().expect("tempdir");
        let s = section(empty.path());
        assert!(
            s.contains("| `id_event` | integer | required | `1` |"),
            "{s}"
        );
        let start = "| `start_date` | `YYYY-MM-DDTHH:MM:SS` date-time | required | \
            `\"2026-09-15T08:00:00\"` |";
        assert!(s.contains(start), "{s}");
    }

    #[test]
    fn only_the_section_is_replaced() {
        let text = format!("a\n{BEGIN}\nold\n{END}\nb\n");
        assert_eq!(
            replaced(&text, &format!("{BEGIN}\nnew\n{END}")).as_deref(),
            Some(format!("a\n{BEGIN}\nnew\n{END}\nb\n").as_str())
        );
        assert_eq!(replaced("no markers", "x"), None);
    }
}
