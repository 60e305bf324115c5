//! `eventbox gen`: invents a realistic event as a bundle, for load tests and demos.
//!
//! Brazilian Portuguese throughout (names with accents, cities with their coordinates, payment
//! methods and statuses as the platform writes them), dates in the documented formats, price tiers
//! per ticket, decimal amounts written with two decimals (`amount_receive_payment` is the amount
//! less the method's fee, so never above it), sponsors in the event page, submissions with their
//! authors, and a detail file for a few group purchases. Every bundle passes `check --strict`.
//!
//! Shaped for two promises:
//! - **the same seed gives the same files, for good**: one hand-written generator (`Rng`) is
//!   drawn from in a fixed order, nothing reads the clock, and the word lists live here;
//! - **fast**: payments (the file that grows) are streamed one record per line into a
//!   `BufWriter`, with amounts in integer cents; 200,000 payments take about a second in a
//!   release build. The small files go through `serde_json` (pretty, numbers as written).
//!
//! The bundle is written into a staging folder and swapped in whole (see `crate::stage`),
//! so a running server never reads it half-written.

use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{Days, NaiveDate};
use serde_json::{json, Number, Value};

use crate::rng::Rng;
use crate::stage::{StageError, Staging};
use crate::token::token_hint;
use crate::token::Token;

/// What `gen` makes: the `eventbox gen` command line (each field's doc is its `--help` line);
/// [`GenOptions::new`] gives the same defaults, which a test holds equal.
#[derive(Debug, Clone, clap::Args)]
pub struct GenOptions {
    /// The bundle folder to create or replace: absent, empty, or a bundle (it has bundle.toml)
    #[arg(long, value_name = "DIR/NAME")]
    pub into: PathBuf,
    /// Replace --into even when it holds other bundles or files (all of them are deleted)
    // Never a file or a symbolic link (see `crate::stage::check_target`).
    #[arg(long)]
    pub force: bool,
    /// How many payments
    #[arg(long, default_value_t = 1000, value_name = "N")]
    pub payments: usize,
    /// How many submissions
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub submissions: usize,
    /// The seed: the same seed gives the same files
    #[arg(long, default_value_t = 1, value_name = "S")]
    pub seed: u64,
    /// The token that opens the bundle [default: NAME-token]
    // Its `Debug` shows a hint.
    #[arg(long, value_name = "T")]
    pub token: Option<Token>,
    // Set from elsewhere (a signal handler) to stop early: `run` returns
    // [`GenError::Interrupted`] and removes its staging folder. Not a flag.
    #[arg(skip)]
    pub cancel: Option<Arc<AtomicBool>>,
}

impl GenOptions {
    pub fn new(into: impl Into<PathBuf>) -> GenOptions {
        GenOptions {
            into: into.into(),
            force: false,
            payments: 1000,
            submissions: 100,
            seed: 1,
            token: None,
            cancel: None,
        }
    }
}

/// Why `gen` failed; nothing was swapped in.
#[derive(Debug, thiserror::Error)]
pub enum GenError {
    #[error("--into {}: {reason}", path.display())]
    BadTarget { path: PathBuf, reason: String },
    #[error("--token: a token must not be blank or have white space around it")]
    BadToken,
    #[error("cannot write {}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error(transparent)]
    Stage(#[from] StageError),
    #[error("--{option}: at most {} ({MAX_COUNT_NOTE})", MAX_COUNT)]
    TooMany { option: &'static str },
    #[error("interrupted; nothing was swapped in")]
    Interrupted,
}

/// The most payments or submissions one `gen` makes: ten million payments make a
/// `payments.json` of about 5 GB, past `--max-file-bytes`' default fivefold.
pub const MAX_COUNT: usize = 10_000_000;
const MAX_COUNT_NOTE: &str =
    "a list of ten million records is gigabytes of JSON (ten million payments: about 5 GB)";

/// What `gen` made.
#[derive(Debug, Clone)]
pub struct GenSummary {
    pub into: PathBuf,
    pub seed: u64,
    pub payments: usize,
    pub details: usize,
    pub submissions: usize,
    pub attendees: usize,
    /// Activities (`session.json`), about one for every 40 attendees, from 6 to 300.
    pub activities: usize,
    pub speakers: usize,
    pub certificates: usize,
    pub bytes: u64,
    pub elapsed: Duration,
    /// The token's first characters (a token is never printed whole).
    pub token_hint: String,
    pub default_token: bool,
    /// Another bundle beside it whose `bundle.toml` names the same token: a server of that data
    /// folder would serve neither of the two with it (a token opens one bundle).
    pub token_taken_by: Option<String>,
}

impl fmt::Display for GenSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "generated {} (seed {}) in {:.2} s: {} payments, {} payment details, {} submissions, {} attendees, {} activities, {} speakers, {} certificates, {}\n  token {}{}",
            self.into.display(),
            self.seed,
            self.elapsed.as_secs_f64(),
            self.payments,
            self.details,
            self.submissions,
            self.attendees,
            self.activities,
            self.speakers,
            self.certificates,
            crate::stage::human_bytes(self.bytes),
            self.token_hint,
            if self.default_token {
                " (the default: the bundle's name followed by -token)"
            } else {
                ""
            }
        )?;
        if let Some(other) = &self.token_taken_by {
            write!(
                f,
                "\n  warning: bundle {other:?} beside it names the same token, and a token opens one \
                 bundle: a server of this data folder serves only one of the two with it \
                 (give another --token)"
            )?;
        }
        Ok(())
    }
}

/// The bundle beside `into` (in its parent folder, which a server would serve) whose
/// `bundle.toml` names `token`, if any. A `bundle.toml` that cannot be read is passed over.
fn token_taken_by(into: &Path, token: &str) -> Option<String> {
    let own = into.file_name()?;
    let parent = match into.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut names: Vec<String> = std::fs::read_dir(parent)
        .ok()?
        .flatten()
        .filter(|e| e.file_name() != own && e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|name| !crate::load::ignored(name))
        .collect();
    names.sort();
    names.into_iter().find(|name| {
        let path = parent.join(name).join("bundle.toml");
        let Ok(text) = crate::read::read(&path, 1 << 20) else {
            return false;
        };
        let Ok(text) = String::from_utf8(text) else {
            return false;
        };
        let Ok(value) = crate::model::parse_text(&text, crate::model::Format::Toml) else {
            return false;
        };
        let mut diag = crate::model::decode::Diag::default();
        crate::model::bundle_config(&value, &mut diag)
            .is_some_and(|c| c.tokens.iter().any(|t| t.expose() == token))
    })
}

/// Generates the bundle and swaps it into place.
pub fn run(opts: &GenOptions) -> Result<GenSummary, GenError> {
    let started = Instant::now();
    for (option, n) in [
        ("payments", opts.payments),
        ("submissions", opts.submissions),
    ] {
        if n > MAX_COUNT {
            return Err(GenError::TooMany { option });
        }
    }
    // `s3://bucket/prefix/NAME` would be a local folder `s3:/bucket/...`, said to be made.
    if opts.into.to_string_lossy().contains("://") {
        return Err(GenError::BadTarget {
            path: opts.into.clone(),
            reason: "gen writes a local folder, not a URL: gen into a folder, serve it, and \
                     publish it with pull --into (docs/pull-and-gen.md)"
                .into(),
        });
    }
    let name = opts
        .into
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| !crate::load::ignored(n))
        .ok_or_else(|| GenError::BadTarget {
            path: opts.into.clone(),
            reason: "name the bundle folder (not starting with `_` or `.`), e.g. data/loadtest"
                .into(),
        })?;
    crate::stage::check_target(&opts.into, opts.force).map_err(|refusal| GenError::BadTarget {
        path: opts.into.clone(),
        reason: refusal.to_string(),
    })?;
    let token = opts
        .token
        .as_ref()
        .map_or_else(|| format!("{name}-token"), |t| t.expose().to_string());
    if token.trim().is_empty() || token.trim() != token {
        return Err(GenError::BadToken);
    }
    let staging = Staging::create(&opts.into, "gen", opts.force)?;
    let dir = staging.path();
    let mut rng = Rng::new(opts.seed);
    let event = EventPlan::new(&mut rng);

    let cancel = opts.cancel.as_deref();
    let mut emails = Emails::default();
    let payments = write_payments(
        &dir.join("payments.json"),
        &event,
        opts.payments,
        (&mut rng, &mut emails),
        cancel,
    )?;
    let mut bytes = payments.bytes;
    bytes += write_value(&dir.join("event.json"), &event.body(&payments.sold))?;
    let details_dir = dir.join("payment_details");
    std::fs::create_dir(&details_dir).map_err(io_error(&details_dir))?;
    for detail in &payments.groups {
        let path = details_dir.join(format!("{}.json", detail.reference));
        bytes += write_value(&path, &detail.body(&event, &mut rng))?;
    }
    bytes += write_value(&dir.join("submission.json"), &event.submission_body())?;
    bytes += event.write_submission_list(
        &dir.join("submission_list.json"),
        opts.submissions,
        &mut rng,
        cancel,
    )?;
    bytes += write_value(&dir.join("hotsite.json"), &event.hotsite(&mut rng))?;
    // A stream of its own, so adding attendees changed none of the other files of a seed.
    let mut people = Rng::new(opts.seed ^ ATTENDEES_STREAM);
    let attendees = event.write_attendees(
        &dir.join("attendees.json"),
        &payments.registrations,
        (&mut people, &mut emails),
        cancel,
    )?;
    bytes += attendees.bytes;
    // The programme and the certificates: each file from a stream of its own, for the same
    // reason; the activities scale with the attendees.
    let activities = (attendees.count / 40).clamp(MIN_ACTIVITIES, MAX_ACTIVITIES);
    let speakers = event.speakers(
        activities.div_ceil(3),
        &mut Rng::new(opts.seed ^ SPEAKERS_STREAM),
    );
    bytes += write_value(&dir.join("speaker.json"), &json!({ "data": speakers }))?;
    let sessions = event.activities(
        activities,
        &speakers,
        &mut Rng::new(opts.seed ^ SESSIONS_STREAM),
    );
    bytes += write_value(&dir.join("session.json"), &json!({ "data": sessions }))?;
    let certificates = event.write_certificates(
        &dir.join("certificates.json"),
        &attendees.confirmed,
        &mut Rng::new(opts.seed ^ CERTIFICATES_STREAM),
        cancel,
    )?;
    bytes += certificates.bytes;
    let note = format!("Generated by `eventbox gen --seed {}`.", opts.seed);
    let toml_text =
        crate::model::bundle_toml(std::slice::from_ref(&token), Some(&note), None, None);
    let toml_path = dir.join("bundle.toml");
    crate::stage::write_private(&toml_path, toml_text.as_bytes()).map_err(io_error(&toml_path))?;
    bytes += toml_text.len() as u64;

    interrupted(cancel)?;
    staging.commit()?;
    Ok(GenSummary {
        into: opts.into.clone(),
        seed: opts.seed,
        payments: opts.payments,
        details: payments.groups.len(),
        submissions: opts.submissions,
        attendees: attendees.count,
        activities,
        speakers: speakers.len(),
        certificates: certificates.count,
        bytes,
        elapsed: started.elapsed(),
        token_hint: token_hint(&token),
        default_token: opts.token.is_none(),
        token_taken_by: token_taken_by(&opts.into, &token),
    })
}

/// [`GenError::Interrupted`] once `cancel` is set.
fn interrupted(cancel: Option<&AtomicBool>) -> Result<(), GenError> {
    match cancel {
        Some(c) if c.load(Ordering::Relaxed) => Err(GenError::Interrupted),
        _ => Ok(()),
    }
}

/// Turns an I/O error on `path` into the error `gen` reports.
fn io_error(path: &Path) -> impl Fn(io::Error) -> GenError + Copy + '_ {
    |source| GenError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A new file at `path`, written through a large buffer (records go in one by one).
fn create(path: &Path) -> Result<BufWriter<File>, GenError> {
    Ok(BufWriter::with_capacity(
        1 << 20,
        File::create(path).map_err(io_error(path))?,
    ))
}

/// A list file written one compact record per line, so that no tree of a large event is ever
/// held: the text before the records, each record (on its own line at `indent`), then the text
/// after them, made from their count.
struct ListWriter<'p> {
    w: BufWriter<File>,
    path: &'p Path,
    indent: &'static [u8],
    /// Each record indented over lines, as `serde_json`'s pretty printer lays out the whole
    /// file, rather than compact on one.
    pretty: bool,
    line: Vec<u8>,
    scratch: Vec<u8>,
    written: Written,
    cancel: Option<&'p AtomicBool>,
}

impl<'p> ListWriter<'p> {
    fn create(
        path: &'p Path,
        head: &str,
        indent: &'static str,
        cancel: Option<&'p AtomicBool>,
    ) -> Result<Self, GenError> {
        let mut w = create(path)?;
        w.write_all(head.as_bytes()).map_err(io_error(path))?;
        Ok(ListWriter {
            w,
            path,
            indent: indent.as_bytes(),
            pretty: false,
            line: Vec::with_capacity(512),
            scratch: Vec::new(),
            written: Written {
                bytes: head.len() as u64,
                count: 0,
            },
            cancel,
        })
    }

    /// Records laid out as `serde_json::to_vec_pretty` lays them out at `indent`.
    fn pretty(mut self) -> Self {
        self.pretty = true;
        self
    }

    fn record(&mut self, record: &Value) -> Result<(), GenError> {
        let io = io_error(self.path);
        if self.written.count.is_multiple_of(4096) {
            interrupted(self.cancel)?;
        }
        self.line.clear();
        if self.written.count > 0 {
            self.line.push(b',');
        }
        self.line.push(b'\n');
        self.line.extend_from_slice(self.indent);
        if self.pretty {
            self.scratch.clear();
            serde_json::to_writer_pretty(&mut self.scratch, record).map_err(|e| io(e.into()))?;
            // A JSON string holds no raw line break: every one is the layout's.
            for (i, l) in self.scratch.split(|&b| b == b'\n').enumerate() {
                if i > 0 {
                    self.line.push(b'\n');
                    self.line.extend_from_slice(self.indent);
                }
                self.line.extend_from_slice(l);
            }
        } else {
            serde_json::to_writer(&mut self.line, record).map_err(|e| io(e.into()))?;
        }
        self.w.write_all(&self.line).map_err(io)?;
        self.written.bytes += self.line.len() as u64;
        self.written.count += 1;
        Ok(())
    }

    fn finish(mut self, tail: impl FnOnce(usize) -> String) -> Result<Written, GenError> {
        let io = io_error(self.path);
        let tail = tail(self.written.count);
        self.w.write_all(tail.as_bytes()).map_err(io)?;
        self.w.flush().map_err(io)?;
        self.written.bytes += tail.len() as u64;
        Ok(self.written)
    }
}

fn write_value(path: &Path, value: &Value) -> Result<u64, GenError> {
    let io = io_error(path);
    let mut text = serde_json::to_vec_pretty(value).map_err(|e| io(io::Error::other(e)))?;
    text.push(b'\n');
    std::fs::write(path, &text).map_err(io)?;
    Ok(text.len() as u64)
}

// ---- word lists ---------------------------------------------------------------------------

const FIRST_NAMES: [&str; 52] = [
    "Ana",
    "João",
    "Maria",
    "José",
    "Francisca",
    "Antônio",
    "Adriana",
    "Sérgio",
    "Conceição",
    "Thiago",
    "Beatriz",
    "Raimundo",
    "Luíza",
    "Letícia",
    "Márcio",
    "Vitória",
    "Fábio",
    "Débora",
    "Caio",
    "Júlia",
    "Rogério",
    "Patrícia",
    "André",
    "Mônica",
    "Cláudio",
    "Lúcia",
    "Vinícius",
    "Flávia",
    "Otávio",
    "Inês",
    "Túlio",
    "Bárbara",
    "Luís",
    "Cecília",
    "Jéssica",
    "Mateus",
    "Helena",
    "Joaquim",
    "Estêvão",
    "Valéria",
    "Simão",
    "Aurélio",
    "Natália",
    "Rafael",
    "Camila",
    "Pedro",
    "Larissa",
    "Gabriel",
    "Sofia",
    "Heitor",
    "Alícia",
    "Iara",
];

const LAST_NAMES: [&str; 48] = [
    "Silva",
    "Santos",
    "Oliveira",
    "Souza",
    "Rodrigues",
    "Ferreira",
    "Alves",
    "Pereira",
    "Lima",
    "Gomes",
    "Ribeiro",
    "Carvalho",
    "Araújo",
    "Gonçalves",
    "Conceição",
    "Bragança",
    "Magalhães",
    "Simões",
    "Falcão",
    "Antunes",
    "Brandão",
    "Guimarães",
    "Nóbrega",
    "Gusmão",
    "Assunção",
    "Peçanha",
    "Sá",
    "Leão",
    "Cortês",
    "Mendonça",
    "Barbosa",
    "Rocha",
    "Dias",
    "Nascimento",
    "Andrade",
    "Moreira",
    "Nunes",
    "Vieira",
    "Monteiro",
    "Cardoso",
    "Teixeira",
    "Correia",
    "Ramos",
    "Freitas",
    "Macêdo",
    "Queiroz",
    "Sampaio",
    "Albuquerque",
];

/// Invented addresses only (the `exemplo` domains), so no generated e-mail reaches a person.
const EMAIL_DOMAINS: [&str; 5] = [
    "exemplo.com.br",
    "email.exemplo.com.br",
    "universidade.exemplo.edu.br",
    "instituto.exemplo.org.br",
    "prefeitura.exemplo.gov.br",
];

/// City, state, latitude, longitude, area code.
const CITIES: [(&str, &str, &str, &str, &str); 18] = [
    ("São Paulo", "SP", "-23.5505", "-46.6333", "11"),
    ("Rio de Janeiro", "RJ", "-22.9068", "-43.1729", "21"),
    ("Belo Horizonte", "MG", "-19.9167", "-43.9345", "31"),
    ("Brasília", "DF", "-15.7939", "-47.8828", "61"),
    ("Salvador", "BA", "-12.9714", "-38.5014", "71"),
    ("Fortaleza", "CE", "-3.7319", "-38.5267", "85"),
    ("Recife", "PE", "-8.0476", "-34.8770", "81"),
    ("Porto Alegre", "RS", "-30.0346", "-51.2177", "51"),
    ("Curitiba", "PR", "-25.4284", "-49.2733", "41"),
    ("Florianópolis", "SC", "-27.5954", "-48.5480", "48"),
    ("Belém", "PA", "-1.4558", "-48.4902", "91"),
    ("Goiânia", "GO", "-16.6869", "-49.2648", "62"),
    ("Maceió", "AL", "-9.6658", "-35.7353", "82"),
    ("São Luís", "MA", "-2.5307", "-44.3068", "98"),
    ("Vitória", "ES", "-20.3155", "-40.3128", "27"),
    ("João Pessoa", "PB", "-7.1195", "-34.8450", "83"),
    ("Cuiabá", "MT", "-15.6014", "-56.0979", "65"),
    ("Manaus", "AM", "-3.1190", "-60.0217", "92"),
];

const VENUES: [&str; 5] = [
    "Centro de Convenções",
    "Centro de Eventos",
    "Pavilhão de Exposições",
    "Teatro Municipal",
    "Campus Universitário",
];

/// A field, its acronym, its topic areas.
struct Theme {
    field: &'static str,
    acronym: &'static str,
    society: &'static str,
    topics: [&'static str; 6],
}

const THEMES: [Theme; 5] = [
    Theme {
        field: "Engenharia Sanitária e Ambiental",
        acronym: "CBESA",
        society: "Sócio da associação",
        topics: [
            "Abastecimento de água",
            "Esgotamento sanitário",
            "Resíduos sólidos urbanos",
            "Drenagem urbana",
            "Gestão, regulação e políticas públicas",
            "Mudanças climáticas e saneamento",
        ],
    },
    Theme {
        field: "Cardiologia",
        acronym: "CBCARD",
        society: "Sócio da sociedade",
        topics: [
            "Insuficiência cardíaca",
            "Arritmias",
            "Cardiologia intervencionista",
            "Prevenção cardiovascular",
            "Imagem cardiovascular",
            "Cardiopediatria",
        ],
    },
    Theme {
        field: "Educação Matemática",
        acronym: "CBEM",
        society: "Professor da rede pública",
        topics: [
            "Formação de professores",
            "Ensino de álgebra",
            "Geometria e visualização",
            "Tecnologias digitais na educação",
            "Educação inclusiva",
            "História da matemática",
        ],
    },
    Theme {
        field: "Ciência do Solo",
        acronym: "CBCS",
        society: "Sócio da sociedade",
        topics: [
            "Fertilidade do solo",
            "Manejo e conservação do solo",
            "Biologia do solo",
            "Física do solo",
            "Solos e mudanças climáticas",
            "Agricultura de precisão",
        ],
    },
    Theme {
        field: "Computação Aplicada",
        acronym: "CBCA",
        society: "Sócio da sociedade",
        topics: [
            "Inteligência artificial",
            "Engenharia de software",
            "Redes e sistemas distribuídos",
            "Segurança da informação",
            "Computação em nuvem",
            "Interação humano-computador",
        ],
    },
];

/// Ticket title (the society's is the theme's), base price in cents, weight among buyers.
const TICKETS: [(&str, u64, u64); 5] = [
    ("Profissional", 89_000, 30),
    ("Estudante de graduação", 21_050, 35),
    ("Pós-graduando (mestrado e doutorado)", 45_000, 20),
    ("", 54_000, 10),
    ("Acompanhante (apenas solenidade de abertura)", 12_000, 5),
];

/// A payment method as the platform writes it, its brands (`type_payment`), and its fee: a
/// percentage in hundredths and a fixed part in cents.
struct Method {
    name: &'static str,
    brands: &'static [&'static str],
    fee_bp: u64,
    fee_fixed: u64,
}

const METHODS: [(Method, u64); 4] = [
    (
        Method {
            name: "Cartão de crédito",
            brands: &["Visa", "Mastercard", "Elo", "American Express", "Hipercard"],
            fee_bp: 499,
            fee_fixed: 0,
        },
        50,
    ),
    (
        Method {
            name: "Pix",
            brands: &["Pix"],
            fee_bp: 99,
            fee_fixed: 0,
        },
        30,
    ),
    (
        Method {
            name: "Boleto bancário",
            brands: &["Boleto"],
            fee_bp: 0,
            fee_fixed: 349,
        },
        15,
    ),
    (
        Method {
            name: "Cartão de débito",
            brands: &["Visa Débito", "Maestro", "Elo Débito"],
            fee_bp: 239,
            fee_fixed: 0,
        },
        5,
    ),
];

const STATUSES: [(&str, u64); 6] = [
    ("Pago", 78),
    ("Pendente", 8),
    ("Cancelado", 6),
    ("Estornado", 3),
    ("Recusado", 3),
    ("Em análise", 2),
];

const COUPONS: [(&str, u64); 3] = [("ESTUDANTE10", 10), ("PARCEIRO15", 15), ("GRUPO20", 20)];

const NOTES: [&str; 6] = [
    "Solicitou recibo com CNPJ",
    "Pagamento via empenho",
    "Inscrição feita pela secretaria",
    "Nota fiscal em nome da instituição",
    "Aluno bolsista – confirmar matrícula",
    "Pediu certificado em nome social",
];

const SPONSORS: [&str; 10] = [
    "Aquática Equipamentos Ltda.",
    "Instituto Ipê de Pesquisa",
    "Editora Saberes & Letras",
    "Cooperativa Solo Fértil",
    "Laboratórios Jequitibá",
    "Tecnologia Buriti S.A.",
    "Banco Cidadão",
    "Gráfica Ribeirão",
    "Construtora Pau-Brasil",
    "Associação dos Amigos da Ciência",
];

const SUBMISSION_TYPES: [&str; 4] = [
    "Artigo completo",
    "Resumo expandido",
    "Pôster digital – {{name}}",
    "Relato de experiência",
];

const TITLE_OPENINGS: [&str; 8] = [
    "Avaliação de",
    "Análise de",
    "Estudo comparativo de",
    "Proposta metodológica para",
    "Impactos de",
    "Revisão sistemática sobre",
    "Diagnóstico de",
    "Modelagem de",
];

const SUBMISSION_STATUSES: [(&str, u64); 4] = [
    ("Aprovado", 60),
    ("Em avaliação", 20),
    ("Aprovado com ressalvas", 10),
    ("Reprovado", 10),
];

const ROOMS: [&str; 6] = [
    "Auditório Jequitibá",
    "Sala 1 – Pavilhão Azul",
    "Sala 2 – Pavilhão Azul",
    "Sala 3 – Pavilhão Verde",
    "Auditório Ipê",
    "Espaço Pôsteres",
];

// ---- small helpers ------------------------------------------------------------------------

/// `35000` cents → `350.00` as a JSON number written with two decimals.
fn money(cents: u64) -> Value {
    Number::from_str(&format!("{}.{:02}", cents / 100, cents % 100))
        .map_or(Value::Null, Value::Number)
}

/// A name's letters for an e-mail address: lower case, accents dropped, spaces as dots.
fn email_part(name: &str) -> String {
    name.chars()
        .filter_map(|c| {
            let plain = match c {
                'á' | 'à' | 'â' | 'ã' | 'Á' | 'Â' | 'Ã' => 'a',
                'é' | 'ê' | 'É' | 'Ê' => 'e',
                'í' | 'Í' => 'i',
                'ó' | 'ô' | 'õ' | 'Ó' | 'Ô' => 'o',
                'ú' | 'ü' | 'Ú' => 'u',
                'ç' | 'Ç' => 'c',
                ' ' => '.',
                c if c.is_ascii_alphanumeric() => c.to_ascii_lowercase(),
                _ => return None,
            };
            Some(plain)
        })
        .collect()
}

fn person(rng: &mut Rng) -> String {
    let first = rng.pick(&FIRST_NAMES);
    let last = rng.pick(&LAST_NAMES);
    if rng.chance(30) {
        let middle = rng.pick(&LAST_NAMES);
        format!("{first} {middle} {last}")
    } else {
        format!("{first} {last}")
    }
}

fn email(rng: &mut Rng, name: &str) -> String {
    let mut parts = name.split(' ');
    let first = parts.next().unwrap_or("pessoa");
    let last = parts.next_back().unwrap_or("silva");
    let domain = rng.pick(&EMAIL_DOMAINS);
    if rng.chance(50) {
        format!(
            "{}.{}{}@{domain}",
            email_part(first),
            email_part(last),
            rng.range(1, 99)
        )
    } else {
        format!("{}.{}@{domain}", email_part(first), email_part(last))
    }
}

/// The e-mail addresses given to people who register, each once: the platform registers a
/// person once per event, and eventbox finds a registration by its e-mail. A name pool this
/// size gave one address to up to ten people of 50,000 payments.
#[derive(Debug, Default)]
struct Emails(std::collections::HashSet<String>);

impl Emails {
    /// `email`, or where taken, the first of `local.2@domain`, `local.3@domain`, ... that is
    /// free (no draw from the generator: a seed whose addresses never clash is unchanged).
    fn unique(&mut self, email: String) -> String {
        if self.0.insert(email.clone()) {
            return email;
        }
        let (local, domain) = email.split_once('@').unwrap_or((&email, "exemplo.com.br"));
        (2..)
            .map(|n| format!("{local}.{n}@{domain}"))
            .find(|e| self.0.insert(e.clone()))
            .unwrap_or(email)
    }
}

/// A CPF (the Brazilian taxpayer number) with valid check digits, as `123.456.789-09`.
fn cpf(rng: &mut Rng) -> String {
    let mut d = [0u64; 11];
    for x in d.iter_mut().take(9) {
        *x = rng.below(10);
    }
    for (len, slot) in [(9usize, 9usize), (10, 10)] {
        let sum: u64 = (0..len).map(|i| d[i] * (len as u64 + 1 - i as u64)).sum();
        let r = (sum * 10) % 11;
        d[slot] = if r == 10 { 0 } else { r };
    }
    format!(
        "{}{}{}.{}{}{}.{}{}{}-{}{}",
        d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8], d[9], d[10]
    )
}

fn phone(rng: &mut Rng, area: &str) -> String {
    format!("{area} 9{:04}-{:04}", rng.below(10_000), rng.below(10_000))
}

fn br_date(d: NaiveDate) -> String {
    d.format("%d/%m/%Y").to_string()
}

fn iso(d: NaiveDate, hour: u64, minute: u64) -> String {
    format!("{}T{hour:02}:{minute:02}:00", d.format("%Y-%m-%d"))
}

fn add_days(d: NaiveDate, n: u64) -> NaiveDate {
    d.checked_add_days(Days::new(n)).unwrap_or(d)
}

// ---- the event --------------------------------------------------------------------------

struct Tier {
    id: u64,
    cents: u64,
    start: NaiveDate,
    due: NaiveDate,
}

struct Ticket {
    id: u64,
    title: String,
    weight: u64,
    tiers: Vec<Tier>,
}

/// Everything drawn once and shared by the files.
struct EventPlan {
    id: u64,
    theme: &'static Theme,
    edition: u64,
    year: i32,
    city: (
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        &'static str,
    ),
    venue: String,
    start: NaiveDate,
    days: u64,
    registration_start: NaiveDate,
    registration_end: NaiveDate,
    tickets: Vec<Ticket>,
}

impl EventPlan {
    fn new(rng: &mut Rng) -> EventPlan {
        let id = rng.range(10_000, 99_999);
        let theme = rng.pick(&THEMES);
        let city = *rng.pick(&CITIES);
        let venue = format!("{} de {}", rng.pick(&VENUES), city.0);
        let year = 2026 + rng.below(2) as i32;
        let base = NaiveDate::from_ymd_opt(year, 8, 1).unwrap_or_default();
        let start = add_days(base, rng.below(100));
        let days = rng.range(2, 4);
        let registration_start = start - Days::new(rng.range(150, 220));
        let registration_end = start - Days::new(1);
        let open = (registration_end - registration_start).num_days().max(3) as u64;
        let mut next_price_id = rng.range(30_000, 39_000);
        let tickets = TICKETS
            .iter()
            .enumerate()
            .map(|(i, (title, cents, weight))| {
                let title = if title.is_empty() {
                    theme.society.to_string()
                } else {
                    (*title).to_string()
                };
                let n = rng.range(1, 3);
                let window = open / n;
                let tiers = (0..n)
                    .map(|k| {
                        next_price_id += rng.range(1, 6);
                        let start = add_days(registration_start, k * window);
                        let due = if k + 1 == n {
                            registration_end
                        } else {
                            add_days(registration_start, (k + 1) * window - 1)
                        };
                        // Each later tier costs about 15% more, rounded to 50 cents.
                        let cents = (cents + cents * 15 * k / 100) / 50 * 50;
                        Tier {
                            id: next_price_id,
                            cents,
                            start,
                            due,
                        }
                    })
                    .collect();
                Ticket {
                    id: 9_100 + i as u64 + id % 100 * 10,
                    title,
                    weight: *weight,
                    tiers,
                }
            })
            .collect();
        EventPlan {
            id,
            theme,
            edition: rng.range(5, 45),
            year,
            city,
            venue,
            start,
            days,
            registration_start,
            registration_end,
            tickets,
        }
    }

    fn title(&self) -> String {
        format!(
            "{}º Congresso Brasileiro de {}",
            self.edition, self.theme.field
        )
    }

    /// The event body; `sold[t][k]` is how many registrations tier `k` of ticket `t` took.
    fn body(&self, sold: &[Vec<u64>]) -> Value {
        let (city, state, lat, lon, _) = self.city;
        let end = add_days(self.start, self.days - 1);
        let tickets: Vec<Value> = self
            .tickets
            .iter()
            .zip(sold)
            .map(|(t, sold)| {
                // The service does not list tiers in order: the latest tier comes first here.
                let prices: Vec<Value> = t
                    .tiers
                    .iter()
                    .zip(sold)
                    .rev()
                    .map(|(tier, n)| {
                        json!({
                            "id_ticket": t.id,
                            "id_ticket_price": tier.id,
                            "price": money(tier.cents),
                            "start_date": iso(tier.start, 0, 0),
                            "due_date": iso(tier.due, 23, 59),
                            "registration_quantity_price": n,
                        })
                    })
                    .collect();
                json!({
                    "title": t.title,
                    "registration_quantity": sold.iter().sum::<u64>(),
                    "prices": prices,
                })
            })
            .collect();
        json!({
            "data": [{
                "id_event": self.id,
                "title": self.title(),
                "url": format!("{}{}", self.theme.acronym.to_lowercase(), self.year),
                "start_date": iso(self.start, 8, 0),
                "end_date": iso(end, 18, 30),
                "start_date_registration": br_date(self.registration_start),
                "end_date_registration": br_date(self.registration_end),
                "summary": format!(
                    "{}: {} dias de palestras, mesas-redondas e apresentação de trabalhos em {city}.",
                    self.theme.field, self.days
                ),
                "description": format!(
                    "<p>O congresso reúne pesquisadores, profissionais e estudantes de {} em {city} ({state}).</p><p>Programação com salas simultâneas, visitas técnicas e feira de expositores.</p>",
                    self.theme.field.to_lowercase()
                ),
                "url_image": format!("https://static.exemplo.com.br/eventos/{}/capa.jpg", self.id),
                "credit_hour": money(self.days * 800 + 50),
                "country": "Brasil",
                "state": state,
                "city": city,
                "venue": self.venue,
                "latitude": lat,
                "longitude": lon,
                "banner": null,
                "tickets": tickets,
            }],
            "count": 1,
        })
    }

    fn submission_body(&self) -> Value {
        let types: Vec<Value> = SUBMISSION_TYPES
            .iter()
            .enumerate()
            .map(|(i, title)| {
                let roles = if i < 2 {
                    format!(
                        "https://static.exemplo.com.br/eventos/{}/modelo-{}.docx",
                        self.id,
                        i + 1
                    )
                } else {
                    String::new()
                };
                json!({"id_event": self.id, "id_submissiontype": 1201 + i, "url_roles": roles, "title": title})
            })
            .collect();
        let areas: Vec<Value> = self
            .theme
            .topics
            .iter()
            .enumerate()
            .map(
                |(i, title)| json!({"id_event": self.id, "id_topicarea": 3301 + i, "title": title}),
            )
            .collect();
        json!({
            "submission_type": {"data": types, "count": SUBMISSION_TYPES.len()},
            "topic_area": {"data": areas, "count": self.theme.topics.len()},
            "count": 2,
        })
    }

    /// `submission_list.json`, written a record at a time in the indented layout the whole
    /// value would have.
    fn write_submission_list(
        &self,
        path: &Path,
        n: usize,
        rng: &mut Rng,
        cancel: Option<&AtomicBool>,
    ) -> Result<u64, GenError> {
        let head = "{\n  \"submission\": {\n    \"data\": [";
        let mut list = ListWriter::create(path, head, "      ", cancel)?.pretty();
        let mut id = rng.range(50_000, 59_000);
        for _ in 0..n {
            list.record(&self.submission(&mut id, rng))?;
        }
        let written = list.finish(|count| {
            let close = if count == 0 { "]" } else { "\n    ]" };
            format!("{close},\n    \"count\": {count}\n  }},\n  \"count\": 1\n}}\n")
        })?;
        Ok(written.bytes)
    }

    /// One submission, with the next id after `id`.
    fn submission(&self, id: &mut u64, rng: &mut Rng) -> Value {
        *id += rng.range(1, 12);
        let id = *id;
        let type_index = rng.below(SUBMISSION_TYPES.len() as u64) as usize;
        let area_index = rng.below(self.theme.topics.len() as u64) as usize;
        let topic = self.theme.topics[area_index];
        let (city, state, ..) = *rng.pick(&CITIES);
        let place = match rng.below(5) {
            0 => format!("no município de {city} ({state})"),
            1 => format!("na região metropolitana de {city}"),
            2 => "em comunidades ribeirinhas da Amazônia".to_string(),
            3 => "na rede pública de ensino".to_string(),
            _ => format!("entre {} e {}", self.year - 6, self.year - 1),
        };
        let title = format!(
            "{} {} {place}",
            rng.pick(&TITLE_OPENINGS),
            lower_first(topic)
        );
        let status = *rng.weighted(&SUBMISSION_STATUSES);
        let approved = status.starts_with("Aprovado");
        let files = format!("https://static.exemplo.com.br/eventos/{}", self.id);
        let day = add_days(self.start, rng.below(self.days));
        let slot = rng.below(27); // 20-minute slots from 08:00 to 17:00
        let (h, m) = (8 + slot / 3, slot % 3 * 20);
        let location = if rng.chance(10) {
            Value::Null
        } else {
            Value::from(*rng.pick(&ROOMS))
        };
        let authors = rng.range(1, 5);
        let presenter = rng.range(1, authors);
        let author: Vec<Value> = (1..=authors)
            .map(|order| {
                let name = person(rng);
                let email = email(rng, &name);
                json!({
                    "id_event": self.id,
                    "id_submission": id,
                    "name": name,
                    "email": email,
                    "is_presenter": order == presenter,
                    "author_order": order,
                })
            })
            .collect();
        json!({
            "id_event": self.id,
            "id_submission": id,
            "title": title,
            "status": status,
            "id_submission_type": 1201 + type_index,
            "submission_type": SUBMISSION_TYPES[type_index],
            "topic_area": topic,
            "id_topic_area": 3301 + area_index,
            "abstract": format!("{files}/trabalhos/{id}/resumo.pdf"),
            "proceedings_abstract": if approved { format!("{files}/anais/{id}-resumo.pdf") } else { String::new() },
            "proceedings_full_paper": if approved && type_index == 0 { format!("{files}/anais/{id}-completo.pdf") } else { String::new() },
            "date": iso(day, h, m),
            "start_time": format!("{h:02}:{m:02}"),
            "end_time": format!("{:02}:{:02}", h + (m + 20) / 60, (m + 20) % 60),
            "location": location,
            "author": author,
        })
    }

    fn hotsite(&self, rng: &mut Rng) -> Value {
        let (city, state, ..) = self.city;
        let sponsors = rng.range(3, 8) as usize;
        let first = rng.below(SPONSORS.len() as u64) as usize;
        let items: Vec<Value> = (0..sponsors)
            .map(|i| {
                let name = SPONSORS[(first + i) % SPONSORS.len()];
                let slug: String = email_part(name).replace(['.', '&'], "");
                let link = if rng.chance(50) {
                    format!("www.{slug}.exemplo.com.br")
                } else {
                    format!("https://{slug}.exemplo.com.br")
                };
                json!({
                    "titulo": name,
                    "urlImagem": format!("https://static.exemplo.com.br/eventos/{}/patrocinio/{slug}.png", self.id),
                    "link": link,
                    "id": 500 + i,
                })
            })
            .collect();
        // Built-in areas carry the platform"s fixed ids (1 Inscrições, 2 Atividades,
        // 3 Palestrantes, 4 Submissões, 5 Local do Evento, 9 Patrocinadores); free text, none.
        json!({
            "capa": null,
            "areasSite": [
                {"idAreaSite": null, "titulo": format!("Bem-vindos ao {}", self.title()), "subtitulo": "", "ordem": 1, "jsonObj": [],
                 "template": format!("<h2>Bem-vindos!</h2><p>{city} ({state}) recebe o congresso a partir de {}.</p>", br_date(self.start))},
                {"idAreaSite": 2, "titulo": "Programação", "subtitulo": format!("{} dias de atividades", self.days), "ordem": 2, "jsonObj": [], "template": ""},
                {"idAreaSite": 9, "titulo": "Patrocinadores", "subtitulo": null, "ordem": 3, "jsonObj": items, "template": ""},
                {"idAreaSite": 1, "titulo": "Inscrições", "subtitulo": "Lotes e valores", "ordem": 4, "jsonObj": [], "template": ""},
                {"idAreaSite": null, "titulo": format!("Como chegar: {}", self.venue), "subtitulo": "Transporte e hospedagem", "ordem": 5, "jsonObj": [],
                 "template": "<p>Há ônibus gratuitos a partir da rodoviária a cada 30 minutos e estacionamento no local.</p>"},
            ],
        })
    }
}

/// Seeds the attendees' draws apart from the rest of the event.
const ATTENDEES_STREAM: u64 = 0x00a7_7e4d_ee5e_ed01;

impl EventPlan {
    /// Every payment's buyer as an attendee, confirmed when paid, and for a paid purchase of
    /// several tickets the other people it covers; `checkin_code` an 8-digit number, unique.
    /// Written one compact record per line, as the payments are: no tree of a large event is
    /// ever held. Returns the bytes and records written, and who is confirmed.
    fn write_attendees(
        &self,
        path: &Path,
        registrations: &[Registration],
        (rng, emails): (&mut Rng, &mut Emails),
        cancel: Option<&AtomicBool>,
    ) -> Result<AttendeesWritten, GenError> {
        let mut list = ListWriter::create(path, "{\n  \"data\": [", "    ", cancel)?;
        let mut id = rng.range(1_000_000, 1_999_999);
        let mut code = rng.range(10_000_000, 19_999_999);
        let mut confirmed = Vec::new();
        for r in registrations {
            let companions = if r.paid { r.quantity - 1 } else { 0 };
            for k in 0..=companions {
                let (name, email, document) = if k == 0 {
                    (r.buyer.clone(), r.email.clone(), r.document.clone())
                } else {
                    let name = person(rng);
                    let email = emails.unique(email(rng, &name));
                    (name, email, cpf(rng))
                };
                id += rng.range(1, 5);
                code += rng.range(1, 97);
                let first = name.split(' ').next().unwrap_or_default();
                let last = name.rsplit(' ').next().unwrap_or_default();
                let photo = if rng.chance(40) {
                    format!("https://imagens.exemplo.com.br/pessoas/{id}.jpg")
                } else {
                    " ".to_string()
                };
                let certified = r.paid.then(|| Person {
                    id,
                    name: name.clone(),
                    email: email.clone(),
                    document: document.clone(),
                });
                let record = json!({
                    "id_attendees": id,
                    "id_event": self.id,
                    "checkin_code": code,
                    "name": name,
                    "bagde_name": format!("{first} {last}"),
                    "email": email,
                    "gender": if first.ends_with('a') { "F" } else { "M" },
                    "photo": photo,
                    "document": document,
                    "confirmed": r.paid,
                    "registration_category": self.tickets[r.ticket].title,
                    "registration_date": br_date(r.date),
                    "registration_hour": format!("{:02}:{:02}", r.hour, r.minute),
                });
                list.record(&record)?;
                confirmed.extend(certified);
            }
        }
        let Written { bytes, count } =
            list.finish(|count| format!("\n  ],\n  \"count\": {count}\n}}\n"))?;
        Ok(AttendeesWritten {
            bytes,
            count,
            confirmed,
        })
    }
}

/// What [`EventPlan::write_attendees`] wrote.
struct AttendeesWritten {
    bytes: u64,
    count: usize,
    /// The confirmed attendees, in file order: those who may have a certificate.
    confirmed: Vec<Person>,
}

/// An attendee, as a certificate names one.
struct Person {
    id: u64,
    name: String,
    email: String,
    document: String,
}

// ---- the programme and the certificates ---------------------------------------------------

/// Seeds of the speakers', the activities' and the certificates' draws: a stream per file, so
/// that adding them changed none of the other files of a seed (see [`ATTENDEES_STREAM`]).
const SPEAKERS_STREAM: u64 = 0x05ea_4e25_0000_0001;
const SESSIONS_STREAM: u64 = 0x5e55_1045_0000_0002;
const CERTIFICATES_STREAM: u64 = 0xce27_1f1c_a7e5_0003;

/// Activities: one for every 40 attendees, at least this many…
const MIN_ACTIVITIES: usize = 6;
/// …and at most this many (a large congress's programme, not one per attendee).
const MAX_ACTIVITIES: usize = 300;

/// A kind of activity as the platform names it (`type`), its title's opening, its hours (the
/// `credit_hour` text and the length in minutes), its capacity range, its speakers, its price in
/// cents (0: free with the registration), its weight.
struct Kind {
    name: &'static str,
    opening: &'static str,
    credit_hour: &'static str,
    minutes: u64,
    capacity: (u64, u64),
    speakers: (u64, u64),
    cents: u64,
    weight: u64,
}

#[rustfmt::skip]
const KINDS: [Kind; 6] = [
    Kind { name: "Conferência",               opening: "Conferência: ",         credit_hour: "1", minutes: 60,  capacity: (300, 800), speakers: (1, 1), cents: 0,      weight: 10 },
    Kind { name: "Palestra",                  opening: "",                      credit_hour: "1", minutes: 50,  capacity: (80, 200),  speakers: (1, 1), cents: 0,      weight: 30 },
    Kind { name: "Mesa-redonda",              opening: "Mesa-redonda: ",        credit_hour: "2", minutes: 100, capacity: (80, 200),  speakers: (2, 3), cents: 0,      weight: 20 },
    Kind { name: "Minicurso",                 opening: "Minicurso: ",           credit_hour: "4", minutes: 240, capacity: (25, 60),   speakers: (1, 2), cents: 12_000, weight: 15 },
    Kind { name: "Oficina",                   opening: "Oficina: ",             credit_hour: "2", minutes: 120, capacity: (20, 40),   speakers: (1, 1), cents: 5_000,  weight: 10 },
    Kind { name: "Apresentação de trabalhos", opening: "Sessão de trabalhos: ", credit_hour: "2", minutes: 120, capacity: (60, 120),  speakers: (1, 2), cents: 0,      weight: 15 },
];

/// The index in [`KINDS`] of the minicourse, the kind held on two days.
const MINICURSO: usize = 3;

const ASPECTS: [&str; 8] = [
    "desafios e perspectivas",
    "experiências brasileiras",
    "novas abordagens",
    "da pesquisa à prática",
    "políticas públicas",
    "inovação e tecnologia",
    "indicadores e avaliação",
    "formação e carreira",
];

const TAGS: [&str; 6] = [
    "Pesquisa",
    "Prática profissional",
    "Política pública",
    "Inovação",
    "Formação",
    "Sustentabilidade",
];

const AFFILIATIONS: [&str; 6] = [
    "Universidade Federal de",
    "Universidade Estadual de",
    "Instituto Federal de",
    "Secretaria Municipal de",
    "Empresa de Pesquisa de",
    "Fundação de Amparo à Pesquisa de",
];

/// Starting times of activities: mornings and afternoons, so a four-hour minicourse ends by 18:30.
const STARTS: [(u64, u64); 8] = [
    (8, 0),
    (8, 30),
    (10, 0),
    (10, 30),
    (14, 0),
    (14, 30),
    (16, 0),
    (16, 30),
];

/// `12000` cents → `120.0000`, a JSON number written with
/// four decimals as the platform writes `ticket_price`.
fn price4(cents: u64) -> Value {
    Number::from_str(&format!("{}.{:02}00", cents / 100, cents % 100))
        .map_or(Value::Null, Value::Number)
}

/// The speaker `speaker` (a record of `speaker.json`) as an activity lists it: the same fields,
/// with the activity's `id_session` after `id_speaker`.
fn session_speaker(speaker: &Value, id_session: u64) -> Value {
    let mut out = serde_json::Map::new();
    for (k, v) in speaker.as_object().into_iter().flatten() {
        out.insert(k.clone(), v.clone());
        if k == "id_speaker" {
            out.insert("id_session".into(), Value::from(id_session));
        }
    }
    Value::Object(out)
}

impl EventPlan {
    /// `n` speakers: names with accents, some photos, résumés and links, `resume` sometimes
    /// null (as the documented schedule shows).
    fn speakers(&self, n: usize, rng: &mut Rng) -> Vec<Value> {
        let mut id = rng.range(100_000, 199_999);
        (0..n)
            .map(|_| {
                id += rng.range(1, 7);
                let name = person(rng);
                let slug = email_part(&name).replace('.', "-");
                let photo = if rng.chance(60) {
                    format!("https://imagens.exemplo.com.br/palestrantes/{id}.jpg")
                } else {
                    " ".to_string()
                };
                let resume = if rng.chance(80) {
                    let topic = rng.pick(&self.theme.topics);
                    let (city, ..) = *rng.pick(&CITIES);
                    Value::from(format!(
                        "Pesquisa {} na {} {city}; {} anos de atuação em {}.",
                        lower_first(topic),
                        rng.pick(&AFFILIATIONS),
                        rng.range(5, 30),
                        lower_first(self.theme.field)
                    ))
                } else {
                    Value::Null
                };
                let link = |rng: &mut Rng, percent, text: String| {
                    if rng.chance(percent) {
                        text
                    } else {
                        String::new()
                    }
                };
                let facebook = link(rng, 15, format!("https://www.facebook.com/{slug}"));
                let linkedin = link(rng, 55, format!("https://www.linkedin.com/in/{slug}"));
                let email = email(rng, &name);
                let lattes_id = rng.below(10_000_000_000_000_000);
                let lattes = link(rng, 60, format!("http://lattes.cnpq.br/{lattes_id:016}"));
                let twitter = link(rng, 20, format!("@{}", slug.replace('-', "")));
                let site = link(rng, 10, format!("https://{slug}.exemplo.com.br"));
                json!({
                    "id_event": self.id,
                    "id_speaker": id,
                    "name": name,
                    "photo": photo,
                    "resume": resume,
                    "facebook": facebook,
                    "linkedin": linkedin,
                    "email": email,
                    "lattes": lattes,
                    "twitter": twitter,
                    "site": site,
                })
            })
            .collect()
    }

    /// `n` activities over the event's days, in rooms of the venue; each speaker speaks at about
    /// three; minicourses are often held on two days (one always is, when the event has two
    /// days or more), so the schedule lists them under both.
    fn activities(&self, n: usize, speakers: &[Value], rng: &mut Rng) -> Vec<Value> {
        let weights: Vec<(usize, u64)> = KINDS
            .iter()
            .enumerate()
            .map(|(i, k)| (i, k.weight))
            .collect();
        let mut id = rng.range(200_000, 299_999);
        let mut id_time = rng.range(10_000, 19_999);
        (0..n)
            .map(|j| {
                id += rng.range(1, 9);
                let kind = &KINDS[if j == 2 {
                    MINICURSO
                } else {
                    *rng.weighted(&weights)
                }];
                let topic = *rng.pick(&self.theme.topics);
                let title = format!("{}{topic} – {}", kind.opening, rng.pick(&ASPECTS));
                let description = if rng.chance(20) {
                    String::new()
                } else {
                    format!(
                        "{} sobre {}, com espaço para perguntas do público.",
                        kind.name,
                        lower_first(topic)
                    )
                };
                let cents = if kind.cents > 0 && rng.chance(70) {
                    kind.cents
                } else {
                    0
                };
                let venue = if j % 7 == 0 || kind.capacity.0 >= 300 {
                    ROOMS[0]
                } else {
                    *rng.pick(&ROOMS[1..])
                };
                let tags = format!("{topic}, {}", rng.pick(&TAGS));
                // Speaker j % len first, so every speaker speaks; more for a panel.
                let mut chosen = vec![j % speakers.len().max(1)];
                let more = rng
                    .range(kind.speakers.0, kind.speakers.1)
                    .saturating_sub(1);
                for _ in 0..more {
                    let s = rng.below(speakers.len() as u64) as usize;
                    if !chosen.contains(&s) {
                        chosen.push(s);
                    }
                }
                let speakers: Vec<Value> = chosen
                    .iter()
                    .filter_map(|&s| speakers.get(s))
                    .map(|s| session_speaker(s, id))
                    .collect();
                let first = rng.below(self.days);
                let two_days = kind.name == KINDS[MINICURSO].name
                    && self.days > 1
                    && (j == 2 || rng.chance(50));
                let first = if two_days {
                    first.min(self.days - 2)
                } else {
                    first
                };
                let (h, m) = *rng.pick(&STARTS);
                let end = h * 60 + m + kind.minutes;
                let times: Vec<Value> = (0..if two_days { 2 } else { 1 })
                    .map(|d| {
                        id_time += 1;
                        json!({
                            "id_event": self.id,
                            "id_session": id,
                            "id_time": id_time,
                            "date": iso(add_days(self.start, first + d), 0, 0),
                            "start_time": format!("{h:02}:{m:02}"),
                            "end_time": format!("{:02}:{:02}", end / 60, end % 60),
                        })
                    })
                    .collect();
                json!({
                    "id_session": id,
                    "id_event": self.id,
                    "title": title,
                    "description": description,
                    "credit_hour": if two_days { "8" } else { kind.credit_hour },
                    "capacity": rng.range(kind.capacity.0, kind.capacity.1) / 5 * 5,
                    "ticket_price": price4(cents),
                    "type": kind.name,
                    "venue": venue,
                    "tags": tags,
                    "speakers": speakers,
                    "times": times,
                })
            })
            .collect()
    }

    /// Certificates for about two thirds of the confirmed attendees, with the attendee's name,
    /// e-mail and document and `id_pessoa` = `id_attendees`; one compact record per line, as
    /// the attendees are written.
    fn write_certificates(
        &self,
        path: &Path,
        confirmed: &[Person],
        rng: &mut Rng,
        cancel: Option<&AtomicBool>,
    ) -> Result<Written, GenError> {
        let head = "{\n  \"certificates\": {\n    \"data\": [";
        let mut list = ListWriter::create(path, head, "      ", cancel)?;
        for p in confirmed {
            if !rng.chance(65) {
                continue;
            }
            let record = json!({
                "id_pessoa": p.id,
                "id_event": self.id,
                "name": p.name,
                "email": p.email,
                "document": p.document,
                "certificate_url": format!(
                    "https://static.exemplo.com.br/eventos/{}/certificados/{}.pdf",
                    self.id, p.id
                ),
            });
            list.record(&record)?;
        }
        list.finish(|count| {
            format!("\n    ],\n    \"count\": {count}\n  }},\n  \"count\": 1\n}}\n")
        })
    }
}

/// What a streamed file holds: its bytes and its records.
struct Written {
    bytes: u64,
    count: usize,
}

fn lower_first(s: &str) -> String {
    let mut chars = s.chars();
    chars.next().map_or_else(String::new, |c| {
        c.to_lowercase().chain(chars).collect::<String>()
    })
}

// ---- payments ---------------------------------------------------------------------------

/// A group purchase that gets a detail file: one row per attendee.
struct Group {
    reference: String,
    id_payment: u64,
    buyer: String,
    email: String,
    document: String,
    ticket: usize,
    quantity: u64,
    cents: u64,
}

impl Group {
    fn body(&self, event: &EventPlan, rng: &mut Rng) -> Value {
        let area = event.city.4;
        let share = self.cents / self.quantity;
        let rows: Vec<Value> = (0..self.quantity)
            .map(|i| {
                let (name, email, document) = if i == 0 {
                    (
                        self.buyer.clone(),
                        self.email.clone(),
                        self.document.clone(),
                    )
                } else {
                    let name = person(rng);
                    let email = email(rng, &name);
                    (name, email, cpf(rng))
                };
                // The first row takes the cents a split leaves over, so the rows add up.
                let amount = if i == 0 {
                    self.cents - share * (self.quantity - 1)
                } else {
                    share
                };
                json!({
                    "id_event": event.id,
                    "id_payment": self.id_payment,
                    "reference_payment": self.reference,
                    "attendee": name,
                    "email_attendee": email,
                    "document_attendee": document,
                    "phone_attende": phone(rng, area),
                    "description": "Ingresso",
                    "item": event.tickets[self.ticket].title,
                    "amount": money(amount),
                })
            })
            .collect();
        let count = rows.len();
        json!({"data": rows, "count": count})
    }
}

struct PaymentsWritten {
    bytes: u64,
    /// Paid registrations per ticket and tier.
    sold: Vec<Vec<u64>>,
    groups: Vec<Group>,
    /// One per payment, in payment order: who registered, for which ticket, when.
    registrations: Vec<Registration>,
}

/// A payment's registration: its buyer is an attendee (and, when paid, the other people the
/// purchase covers).
struct Registration {
    buyer: String,
    email: String,
    document: String,
    ticket: usize,
    quantity: u64,
    paid: bool,
    date: NaiveDate,
    hour: u64,
    minute: u64,
}

/// Detail files are written for this many group purchases at most.
const MAX_DETAIL_FILES: usize = 50;

fn write_payments(
    path: &Path,
    event: &EventPlan,
    n: usize,
    (rng, emails): (&mut Rng, &mut Emails),
    cancel: Option<&AtomicBool>,
) -> Result<PaymentsWritten, GenError> {
    let io = io_error(path);
    let mut w = create(path)?;
    let mut sold: Vec<Vec<u64>> = event
        .tickets
        .iter()
        .map(|t| vec![0; t.tiers.len()])
        .collect();
    let mut groups = Vec::new();
    let mut registrations = Vec::with_capacity(n);
    let weights: Vec<(usize, u64)> = event
        .tickets
        .iter()
        .enumerate()
        .map(|(i, t)| (i, t.weight))
        .collect();
    let mut id_payment = rng.range(700_000, 799_999);
    let reference_base = rng.range(100, 999);
    let mut bytes = 0u64;
    let mut line = String::with_capacity(1024);
    let head = "{\n  \"data\": [\n";
    w.write_all(head.as_bytes()).map_err(io)?;
    bytes += head.len() as u64;
    for i in 0..n {
        if i % 4096 == 0 {
            interrupted(cancel)?;
        }
        id_payment += rng.range(1, 9);
        let reference = format!("PG{}{:06}", event.year, reference_base + i as u64);
        let t = *rng.weighted(&weights);
        let ticket = &event.tickets[t];
        let k = rng.below(ticket.tiers.len() as u64) as usize;
        let tier = &ticket.tiers[k];
        let quantity = match rng.below(100) {
            0..=89 => 1,
            90..=96 => 2,
            _ => rng.range(3, 5),
        };
        let mut cents = tier.cents * quantity;
        let coupon = if rng.chance(8) {
            let (code, off) = *rng.pick(&COUPONS);
            cents -= cents * off / 100;
            code
        } else {
            ""
        };
        let method = rng.weighted(&METHODS);
        let brand = rng.pick(method.brands);
        let fee = (cents * method.fee_bp).div_ceil(10_000) + method.fee_fixed;
        let received = cents.saturating_sub(fee);
        let status = *rng.weighted(&STATUSES);
        if status == "Pago" {
            sold[t][k] += quantity;
        }
        let span = (tier.due - tier.start).num_days().max(0) as u64;
        let date = add_days(tier.start, rng.below(span + 1));
        let (hour, minute) = (rng.range(6, 23), rng.below(60));
        let buyer = person(rng);
        let email = emails.unique(email(rng, &buyer));
        let document = cpf(rng);
        let country = if rng.chance(97) {
            "Brasil"
        } else {
            rng.pick(&["Portugal", "Argentina", "Moçambique", "Angola"])
        };
        let note = if status == "Estornado" {
            "Reembolso solicitado por e-mail"
        } else if rng.chance(10) {
            rng.pick(&NOTES)
        } else {
            ""
        };
        line.clear();
        use std::fmt::Write as _;
        let _ = writeln!(
            line,
            "    {{\"id_event\": {}, \"id_payment\": {id_payment}, \"reference_payment\": \"{reference}\", \"buyer\": \"{buyer}\", \"email_buyer\": \"{email}\", \"country_buyer\": \"{country}\", \"document_buyer\": \"{document}\", \"description_payment\": \"{quantity}x {}\", \"date_payment\": \"{}\", \"hour_payment\": \"{hour:02}:{minute:02}\", \"type_payment\": \"{brand}\", \"method_payment\": \"{}\", \"amount_payment\": {}.{:02}, \"amount_receive_payment\": {}.{:02}, \"status_payment\": \"{status}\", \"cupom_payment\": \"{coupon}\", \"note_payment\": \"{note}\"}}{}",
            event.id,
            ticket.title,
            br_date(date),
            method.name,
            cents / 100,
            cents % 100,
            received / 100,
            received % 100,
            if i + 1 == n { "" } else { "," },
        );
        w.write_all(line.as_bytes()).map_err(io)?;
        bytes += line.len() as u64;
        registrations.push(Registration {
            buyer: buyer.clone(),
            email: email.clone(),
            document: document.clone(),
            ticket: t,
            quantity,
            paid: status == "Pago",
            date,
            hour,
            minute,
        });
        if quantity > 1 && groups.len() < MAX_DETAIL_FILES {
            groups.push(Group {
                reference,
                id_payment,
                buyer,
                email,
                document,
                ticket: t,
                quantity,
                cents,
            });
        }
    }
    let tail = format!("  ],\n  \"count\": {n}\n}}\n");
    w.write_all(tail.as_bytes()).map_err(io)?;
    bytes += tail.len() as u64;
    w.flush().map_err(io)?;
    Ok(PaymentsWritten {
        bytes,
        sold,
        groups,
        registrations,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gen_writes_exactly_the_files_of_the_endpoint_table() {
        use std::collections::BTreeSet;

        use crate::api::{OnDisk, API};

        let data = tempfile::tempdir().expect("tmp");
        let dir = data.path().join("tabled");
        let mut o = GenOptions::new(&dir);
        o.payments = 30;
        o.submissions = 40;
        o.seed = 5;
        run(&o).expect("gen succeeds");

        let found: BTreeSet<String> = std::fs::read_dir(&dir)
            .expect("the bundle folder")
            .map(|e| {
                e.expect("an entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();

        let mut expected = BTreeSet::from(["bundle.toml".to_string()]);
        // The company and institutional files are not an event's: gen leaves them out.
        for e in API.iter().filter(|e| !e.app) {
            match e.feed.on_disk() {
                Some(OnDisk::File) => expected.insert(format!("{}.json", e.key)),
                Some(OnDisk::Folder) => expected.insert(e.key.to_string()),
                None => false,
            };
        }
        assert_eq!(found, expected);
    }

    /// One registration per person: no two participants share an e-mail, though the name pool
    /// gave 43 addresses to 89 participants of this seed; and an address taken gets the next
    /// free number, drawing nothing from the generator.
    /// The submission list is written a record at a time, in the very layout the whole value
    /// pretty-printed has (the bytes a seed gives are pinned), also when it is empty.
    #[test]
    fn the_submission_list_streamed_is_the_whole_value_pretty_printed() {
        let tmp = tempfile::tempdir().expect("tmp");
        let event = EventPlan::new(&mut Rng::new(3));
        for n in [0, 1, 3] {
            let path = tmp.path().join(format!("list-{n}.json"));
            let bytes = event
                .write_submission_list(&path, n, &mut Rng::new(9), None)
                .expect("written");
            let streamed = std::fs::read(&path).expect("read");

            let mut rng = Rng::new(9);
            let mut id = rng.range(50_000, 59_000);
            let data: Vec<Value> = (0..n)
                .map(|_| event.submission(&mut id, &mut rng))
                .collect();
            let whole = json!({"submission": {"data": data, "count": n}, "count": 1});
            let mut expected = serde_json::to_vec_pretty(&whole).expect("JSON");
            expected.push(b'\n');

            assert_eq!(
                String::from_utf8_lossy(&streamed),
                String::from_utf8_lossy(&expected)
            );
            assert_eq!(bytes, expected.len() as u64);
        }
    }

    /// A list stops at its next record once cancelled (Ctrl-C, SIGTERM), so a large one is not
    /// written to its end first.
    #[test]
    fn a_list_stops_once_cancelled() {
        let tmp = tempfile::tempdir().expect("tmp");
        let path = tmp.path().join("list.json");
        let cancel = AtomicBool::new(false);
        let mut list = ListWriter::create(&path, "[", "  ", Some(&cancel)).expect("created");
        for _ in 0..5000 {
            list.record(&json!(1)).expect("not cancelled");
        }
        cancel.store(true, Ordering::Relaxed);
        let stopped = (0..4096).find_map(|_| list.record(&json!(1)).err());
        assert!(
            matches!(stopped, Some(GenError::Interrupted)),
            "{stopped:?}"
        );
    }

    #[test]
    fn more_than_the_most_payments_or_submissions_is_refused_before_anything_is_written() {
        let tmp = tempfile::tempdir().expect("tmp");
        let dir = tmp.path().join("huge");
        for (payments, submissions, option) in [
            (usize::MAX, 1, "payments"),
            (1, MAX_COUNT + 1, "submissions"),
        ] {
            let mut o = GenOptions::new(&dir);
            (o.payments, o.submissions) = (payments, submissions);
            let err = run(&o).expect_err("refused");
            assert!(
                matches!(err, GenError::TooMany { option: o } if o == option),
                "{err}"
            );
            assert!(err
                .to_string()
                .starts_with(&format!("--{option}: at most 10000000 (")));
        }
        assert_eq!(std::fs::read_dir(tmp.path()).expect("tmp").count(), 0);
    }

    #[test]
    fn every_participant_has_an_email_of_their_own() {
        let data = tempfile::tempdir().expect("tmp");
        let dir = data.path().join("people");
        let mut o = GenOptions::new(&dir);
        o.payments = 2000;
        o.seed = 7;
        run(&o).expect("gen succeeds");
        let attendees: Value =
            serde_json::from_slice(&std::fs::read(dir.join("attendees.json")).expect("written"))
                .expect("JSON");
        let list = attendees["data"].as_array().expect("a list");
        let emails: std::collections::HashSet<String> = list
            .iter()
            .map(|a| a["email"].as_str().expect("an e-mail").to_lowercase())
            .collect();
        assert_eq!(emails.len(), list.len());

        let mut taken = Emails::default();
        assert_eq!(taken.unique("ana.lima@x.br".into()), "ana.lima@x.br");
        assert_eq!(taken.unique("ana.lima@x.br".into()), "ana.lima.2@x.br");
        assert_eq!(taken.unique("ana.lima@x.br".into()), "ana.lima.3@x.br");
    }

    #[test]
    fn cpf_check_digits_are_valid() {
        // 529.982.247-25 is the textbook valid CPF; check our rule on its first nine digits.
        let mut rng = Rng::new(3);
        for _ in 0..100 {
            let c = cpf(&mut rng);
            let d: Vec<u64> = c
                .chars()
                .filter_map(|ch| ch.to_digit(10).map(u64::from))
                .collect();
            assert_eq!(d.len(), 11, "{c}");
            for len in [9usize, 10] {
                let sum: u64 = (0..len).map(|i| d[i] * (len as u64 + 1 - i as u64)).sum();
                assert_eq!((sum * 10) % 11 % 10, d[len], "{c}");
            }
        }
    }

    #[test]
    fn money_has_two_decimals() {
        assert_eq!(money(35_000).to_string(), "350.00");
        assert_eq!(money(21_005).to_string(), "210.05");
        assert_eq!(money(7).to_string(), "0.07");
    }

    #[test]
    fn ticket_price_has_four_decimals() {
        assert_eq!(price4(12_000).to_string(), "120.0000");
        assert_eq!(price4(0).to_string(), "0.0000");
        assert_eq!(price4(5_005).to_string(), "50.0500");
    }

    #[test]
    fn an_activity_lists_a_speaker_with_its_id_session_after_id_speaker() {
        let speaker = json!({"id_event": 1, "id_speaker": 2, "name": "Ana", "site": ""});
        let listed = session_speaker(&speaker, 9);
        let keys = crate::model::keys(&listed);
        assert_eq!(
            keys,
            ["id_event", "id_speaker", "id_session", "name", "site"]
        );
        assert_eq!(listed["id_session"], 9);
    }

    #[test]
    fn email_parts_drop_accents() {
        assert_eq!(email_part("Conceição"), "conceicao");
        assert_eq!(email_part("Luíza Gonçalves"), "luiza.goncalves");
    }
}
