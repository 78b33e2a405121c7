//! Filter expressions over stored messages (issue 34, item 1): CEL (the Common Expression
//! Language, the `cel` crate), compiled once and evaluated per record of a scan.
//!
//! A record's fields are the expression's variables, each made only when the expression
//! reaches it (the body's JSON is parsed at most once a record, and not at all when
//! `tag == "x" && body.total > 1` fails on the tag):
//!
//! | variable | CEL type | what |
//! |---|---|---|
//! | `topic` | string | the topic's name |
//! | `queue` | int | the queue id |
//! | `offset` | int | the queue offset |
//! | `commit_offset` | int | the commit-log offset |
//! | `born_ms`, `stored_ms` | int | born and store times, ms since the epoch |
//! | `tag` | string | the tag ("" when none) |
//! | `key` | string | the first key ("" when none) |
//! | `keys` | list(string) | every key |
//! | `properties` | map(string, string) | the properties |
//! | `text` | string | the body as text (bad UTF-8 replaced) |
//! | `body` | dyn | the body parsed as JSON; `null` when it is not JSON |
//! | `body_size` | int | the body's length in bytes |
//!
//! Safe by construction: CEL has no statements, loops, I/O or user functions; this crate
//! is built without its regex and time functions. What is left bounded here: the
//! expression's length (`MAX_SOURCE`), the parser's nesting depth, and comprehensions
//! (`all`, `exists`, `map`, `filter`, ...) may not nest, so the work a record costs is at
//! most the expression's length times the record's size. A name that is not a variable
//! above fails to compile, with its position.

use std::borrow::Cow;
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, OnceLock};

use cel::common::ast::{EntryExpr, Expr, IdedExpr};
use cel::common::types::{
    CelBool, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelString, CelUInt,
};
use cel::common::value::{CowVal, Val};
use cel::context::VariableResolver;
use cel::{Context, Env, Program, Value};

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use crate::record::{Header, Parts};

mod fast;

/// The longest expression compiled, in bytes.
pub const MAX_SOURCE: usize = 4096;
/// The deepest nesting the parser accepts.
const MAX_DEPTH: u16 = 64;
/// The deepest tree a compiled expression may be (the evaluator recurses over it).
const MAX_TREE_DEPTH: usize = 128;
/// How deep JSON bodies are turned into values; deeper parts are `null`.
const MAX_JSON_DEPTH: usize = 64;

/// The variables an expression may name.
pub const VARIABLES: [&str; 13] = [
    "topic",
    "queue",
    "offset",
    "commit_offset",
    "born_ms",
    "stored_ms",
    "tag",
    "key",
    "keys",
    "properties",
    "text",
    "body",
    "body_size",
];

/// Why an expression does not compile: a sentence, and where (1-based line and column,
/// 0-based character position in the expression).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileError {
    pub message: String,
    pub line: usize,
    pub column: usize,
    pub position: usize,
}

/// A compiled filter expression.
pub struct Filter {
    source: String,
    program: Program,
    env: Arc<Env>,
    /// The parts of the body's JSON the expression reaches (see `Paths`).
    paths: Paths,
    /// The typed pre-pass (`fast`): answers a record without the interpreter when sure.
    fast: Option<fast::Node>,
    /// The tag every match has (`fast::required_tag`), with its tag hash.
    tag: Option<(u64, Vec<u8>)>,
}

/// The parts of a JSON body an expression can reach: `body.order.total` reaches
/// `order.total` only, so a body is parsed keeping that and skipping the rest (no value
/// made of it). A path that ends (`body.order` used as a value, `body.items[0]`) keeps
/// all under it; `body` used alone keeps everything.
#[derive(Debug, Default, Clone)]
pub struct Paths {
    all: bool,
    children: HashMap<String, Paths>,
}

impl Paths {
    fn add(&mut self, path: &[String]) {
        if self.all {
            return;
        }
        match path.split_first() {
            None => {
                self.all = true;
                self.children.clear();
            }
            Some((first, rest)) => self.children.entry(first.clone()).or_default().add(rest),
        }
    }
}

/// The fields of `expr` when it is a chain of field selections from the variable `body`
/// (`body.a.b` → [a, b]), outermost last.
fn body_path(expr: &IdedExpr) -> Option<Vec<String>> {
    let mut fields = Vec::new();
    let mut at = expr;
    loop {
        match &at.expr {
            Expr::Select(select) => {
                fields.push(select.field.clone());
                at = &select.operand;
            }
            Expr::Ident(name) if name == "body" => {
                fields.reverse();
                return Some(fields);
            }
            _ => return None,
        }
    }
}

impl std::fmt::Debug for Filter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Filter")
            .field("source", &self.source)
            .finish()
    }
}

/// The (1-based line, 1-based column) of character position `position` of `source`.
fn line_column(source: &str, position: usize) -> (usize, usize) {
    let mut line = 1;
    let mut column = 1;
    for c in source.chars().take(position) {
        if c == '\n' {
            line += 1;
            column = 1;
        } else {
            column += 1;
        }
    }
    (line, column)
}

/// The character position of (1-based line, 0-based column) in `source`, clamped to it.
fn position_of(source: &str, line: isize, column: isize) -> usize {
    let line = line.max(1) as usize;
    let column = column.max(0) as usize;
    let mut position = 0;
    for (n, text) in source.split('\n').enumerate() {
        let length = text.chars().count();
        if n + 1 == line {
            return position + column.min(length);
        }
        position += length + 1;
    }
    source.chars().count()
}

fn error_at(source: &str, message: impl Into<String>, position: usize) -> CompileError {
    let (line, column) = line_column(source, position);
    CompileError {
        message: message.into(),
        line,
        column,
        position,
    }
}

/// The stack of the thread an expression is compiled on: the parser and the checks
/// recurse per level of nesting, more than a caller's thread may have room for (a debug
/// build's test thread has 2 MiB); the depth bounds keep them far below this.
const COMPILE_STACK: usize = 64 << 20;

/// Where `source` first nests deeper than `MAX_DEPTH` (brackets, or conditionals
/// chained), outside string literals: refused before the parser recurses into it.
fn too_deep(source: &str) -> Option<usize> {
    let chars: Vec<char> = source.chars().collect();
    let (mut depth, mut conditionals, mut i) = (0usize, 0usize, 0usize);
    let limit = usize::from(MAX_DEPTH);
    while i < chars.len() {
        let c = chars[i];
        match c {
            '"' | '\'' => {
                let raw = i > 0 && matches!(chars[i - 1], 'r' | 'R');
                let triple = chars.get(i + 1) == Some(&c) && chars.get(i + 2) == Some(&c);
                let quotes = if triple { 3 } else { 1 };
                i += quotes;
                loop {
                    match chars.get(i) {
                        None => return None, // unterminated: the parser says where
                        Some('\\') if !raw => i += 2,
                        Some(&q)
                            if q == c
                                && (!triple
                                    || (chars.get(i + 1) == Some(&c)
                                        && chars.get(i + 2) == Some(&c))) =>
                        {
                            i += quotes;
                            break;
                        }
                        Some(_) => i += 1,
                    }
                }
                continue;
            }
            '(' | '[' | '{' => {
                depth += 1;
                if depth > limit {
                    return Some(i);
                }
            }
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            '?' => {
                conditionals += 1;
                if conditionals > limit {
                    return Some(i);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

impl Filter {
    /// Compile `source`; the error says what is wrong and where. The work is done on a
    /// thread of its own with a large stack (`COMPILE_STACK`), so that no expression can
    /// overflow the caller's.
    pub fn compile(source: &str) -> Result<Filter, CompileError> {
        let owned = source.to_owned();
        let compiling = std::thread::Builder::new()
            .name("tidemark-filter-compile".into())
            .stack_size(COMPILE_STACK)
            .spawn(move || Filter::compile_here(&owned));
        match compiling.map(|thread| thread.join()) {
            Ok(Ok(result)) => result,
            _ => Err(error_at(source, "the expression could not be compiled", 0)),
        }
    }

    fn compile_here(source: &str) -> Result<Filter, CompileError> {
        if source.len() > MAX_SOURCE {
            return Err(error_at(
                source,
                format!("the expression is longer than {MAX_SOURCE} bytes"),
                0,
            ));
        }
        if source.trim().is_empty() {
            return Err(error_at(source, "the expression is empty", 0));
        }
        if let Some(position) = too_deep(source) {
            return Err(error_at(
                source,
                format!("the expression nests deeper than {MAX_DEPTH}"),
                position,
            ));
        }
        let env = Env::stdlib();
        let parsed = catch_unwind(AssertUnwindSafe(|| {
            cel::parser::Parser::new()
                .max_recursion_depth(MAX_DEPTH)
                .parse_with_source_info(source)
        }));
        match parsed {
            Err(_) => return Err(error_at(source, "the expression could not be parsed", 0)),
            Ok(Err(errors)) => {
                let (message, position) = match errors.errors.first() {
                    Some(first) => (
                        first.msg.clone(),
                        position_of(source, first.pos.0, first.pos.1),
                    ),
                    None => ("the expression could not be parsed".to_string(), 0),
                };
                return Err(error_at(source, message, position));
            }
            Ok(Ok(_)) => {}
        }
        // The parse above with the depth bound accepted it: compile the program (the same
        // parser, the standard macros).
        let program = match catch_unwind(AssertUnwindSafe(|| env.compile(source))) {
            Ok(Ok(program)) => program,
            Ok(Err(errors)) => {
                let first = errors.errors.first();
                let position = first.map_or(0, |e| position_of(source, e.pos.0, e.pos.1));
                let message = first.map_or("the expression could not be parsed".into(), |e| {
                    e.msg.clone()
                });
                return Err(error_at(source, message, position));
            }
            Err(_) => return Err(error_at(source, "the expression could not be parsed", 0)),
        };
        let mut check = Check {
            source,
            program: &program,
            bound: Vec::new(),
            comprehensions: 0,
            depth: 0,
            paths: Paths::default(),
        };
        check.walk(program.expression())?;
        let paths = check.paths;
        let fast = fast::compile(program.expression(), &paths);
        let tag = fast.as_ref().and_then(fast::required_tag).map(|tag| {
            let tag = tag.as_bytes().to_vec();
            (crate::tags::tag_hash(&tag), tag)
        });
        Ok(Filter {
            source: source.to_string(),
            program,
            env: Arc::new(env),
            paths,
            fast,
            tag,
        })
    }

    /// The expression as given.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The tag hash and tag every match has, if the expression says (a `tag == "…"`
    /// among its top-level `&&`s): records of other tags need not be read.
    pub fn tag(&self) -> Option<(u64, &[u8])> {
        self.tag.as_ref().map(|(hash, tag)| (*hash, tag.as_slice()))
    }

    /// A context to evaluate records in (one a scan: it holds the environment).
    pub fn context(&self) -> Context<'static, 'static> {
        Context::with_env(Arc::clone(&self.env))
    }

    /// Whether the record `parts` with `header` (of topic `parts.topic`) matches: the
    /// expression evaluates to `true`. An evaluation error (a missing field, a type
    /// that does not compare) or a value other than a bool is `Err` with its sentence; a
    /// panic inside the evaluator is caught and is such an error too.
    #[inline]
    pub fn matches(
        &self,
        root: &Context<'_, '_>,
        header: &Header,
        parts: &Parts<'_>,
    ) -> Result<bool, String> {
        let fields = Fields::of(header, parts);
        self.matches_fields(root, &fields)
    }

    /// `matches` for fields given one by one (a message from Python). Inlined into a
    /// scan's loop: the pre-pass's answer without a call.
    #[inline]
    pub fn matches_fields(
        &self,
        root: &Context<'_, '_>,
        fields: &Fields<'_>,
    ) -> Result<bool, String> {
        if let Some(fast) = &self.fast {
            let sure = catch_unwind(AssertUnwindSafe(|| fast.eval(fields, &mut None)));
            if let Ok(Some(answer)) = sure {
                return Ok(answer);
            }
        }
        self.matches_cel(root, fields)
    }

    /// `matches_fields` by the interpreter alone (no pre-pass).
    pub fn matches_cel(&self, root: &Context<'_, '_>, fields: &Fields<'_>) -> Result<bool, String> {
        let vars = RecordVars {
            fields,
            paths: &self.paths,
            body: OnceLock::new(),
        };
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let mut scope = root.new_inner_scope();
            scope.set_variable_resolver(&vars);
            match self.program.execute(&scope) {
                Ok(Value::Bool(b)) => Ok(b),
                Ok(other) => Err(format!(
                    "the expression gave a {}, not a bool",
                    other.type_of()
                )),
                Err(error) => Err(error.to_string()),
            }
        }));
        outcome.unwrap_or_else(|_| Err("the evaluator failed on this record".to_string()))
    }
}

/// The compile-time checks over the program's tree: known names, no nested
/// comprehensions.
struct Check<'a> {
    source: &'a str,
    program: &'a Program,
    /// The names comprehensions bind where the walk is.
    bound: Vec<String>,
    comprehensions: usize,
    depth: usize,
    paths: Paths,
}

impl Check<'_> {
    fn at(&self, expr: &IdedExpr, message: String) -> CompileError {
        let position = self
            .program
            .source_info()
            .offset_for(expr.id)
            .map_or(0, |(start, _)| {
                let start = (start as usize).min(self.source.len());
                self.source
                    .get(..start)
                    .map_or(0, |before| before.chars().count())
            });
        error_at(self.source, message, position)
    }

    fn walk(&mut self, expr: &IdedExpr) -> Result<(), CompileError> {
        if self.depth >= MAX_TREE_DEPTH {
            return Err(self.at(
                expr,
                format!("the expression nests deeper than {MAX_TREE_DEPTH}"),
            ));
        }
        self.depth += 1;
        let checked = self.walk_node(expr);
        self.depth -= 1;
        checked
    }

    fn walk_node(&mut self, expr: &IdedExpr) -> Result<(), CompileError> {
        match &expr.expr {
            Expr::Ident(name) => {
                if name == "body" && !self.bound.iter().any(|b| b == "body") {
                    self.paths.add(&[]);
                }
                if !VARIABLES.contains(&name.as_str()) && !self.bound.iter().any(|b| b == name) {
                    return Err(self.at(
                        expr,
                        format!(
                            "undeclared reference to '{name}' (a message has: {})",
                            VARIABLES.join(", ")
                        ),
                    ));
                }
                Ok(())
            }
            Expr::Call(call) => {
                if let Some(target) = &call.target {
                    self.walk(target)?;
                }
                call.args.iter().try_for_each(|arg| self.walk(arg))
            }
            Expr::Select(select) => {
                if !self.bound.iter().any(|b| b == "body") {
                    if let Some(path) = body_path(expr) {
                        self.paths.add(&path);
                        return Ok(());
                    }
                }
                self.walk(&select.operand)
            }
            Expr::List(list) => list.elements.iter().try_for_each(|e| self.walk(e)),
            Expr::Map(map) => map.entries.iter().try_for_each(|entry| match &entry.expr {
                EntryExpr::MapEntry(e) => {
                    self.walk(&e.key)?;
                    self.walk(&e.value)
                }
                EntryExpr::StructField(f) => self.walk(&f.value),
            }),
            Expr::Struct(_) => {
                Err(self.at(expr, "messages (struct literals) are not supported".into()))
            }
            Expr::Comprehension(c) => {
                if self.comprehensions > 0 {
                    return Err(self.at(
                        expr,
                        "a comprehension (all, exists, exists_one, map, filter) may not be nested in another".into(),
                    ));
                }
                self.walk(&c.iter_range)?;
                self.walk(&c.accu_init)?;
                self.comprehensions += 1;
                let before = self.bound.len();
                self.bound.push(c.iter_var.clone());
                if let Some(second) = &c.iter_var2 {
                    self.bound.push(second.clone());
                }
                self.bound.push(c.accu_var.clone());
                let inner = self
                    .walk(&c.loop_cond)
                    .and_then(|_| self.walk(&c.loop_step))
                    .and_then(|_| self.walk(&c.result));
                self.bound.truncate(before);
                self.comprehensions -= 1;
                inner
            }
            Expr::Literal(_) | Expr::Unspecified => Ok(()),
        }
    }
}

/// A record's fields, borrowed.
#[derive(Debug, Clone, Copy)]
pub struct Fields<'a> {
    pub topic: &'a [u8],
    pub queue: u32,
    pub offset: u64,
    pub commit_offset: u64,
    pub born_ms: i64,
    pub stored_ms: i64,
    pub tag: &'a [u8],
    /// Keys joined by U+001F, as a record holds them.
    pub keys: &'a [u8],
    /// Properties as a record holds them: name U+0001 value, joined by U+0002.
    pub properties: &'a [u8],
    pub body: &'a [u8],
}

impl<'a> Fields<'a> {
    pub fn of(header: &Header, parts: &Parts<'a>) -> Fields<'a> {
        Fields {
            topic: parts.topic,
            queue: header.queue_id,
            offset: header.queue_offset,
            commit_offset: header.commit_offset,
            born_ms: header.born_ms,
            stored_ms: header.store_ms,
            tag: parts.tag,
            keys: parts.keys,
            properties: parts.properties,
            body: parts.body,
        }
    }
}

/// The variables of one record, made as the evaluation asks for them.
struct RecordVars<'f, 'a> {
    fields: &'f Fields<'a>,
    paths: &'f Paths,
    body: OnceLock<Box<dyn Val + 'static>>,
}

fn text(bytes: &[u8]) -> CelString<'_> {
    match std::str::from_utf8(bytes) {
        Ok(s) => CelString::from(s),
        Err(_) => CelString::from(String::from_utf8_lossy(bytes).into_owned()),
    }
}

fn int(value: u64) -> CelInt {
    CelInt::from(i64::try_from(value).unwrap_or(i64::MAX))
}

impl VariableResolver for RecordVars<'_, '_> {
    fn resolve<'b>(&'b self, variable: &str) -> Option<CowVal<'b, 'b>> {
        let f = self.fields;
        Some(match variable {
            "topic" => CowVal::owned(text(f.topic)),
            "queue" => CowVal::owned(CelInt::from(i64::from(f.queue))),
            "offset" => CowVal::owned(int(f.offset)),
            "commit_offset" => CowVal::owned(int(f.commit_offset)),
            "born_ms" => CowVal::owned(CelInt::from(f.born_ms)),
            "stored_ms" => CowVal::owned(CelInt::from(f.stored_ms)),
            "tag" => CowVal::owned(text(f.tag)),
            "key" => {
                let first = f.keys.split(|&b| b == 0x1f).next().unwrap_or_default();
                CowVal::owned(text(first))
            }
            "keys" => {
                let keys: Vec<Box<dyn Val + 'b>> = if f.keys.is_empty() {
                    Vec::new()
                } else {
                    f.keys
                        .split(|&b| b == 0x1f)
                        .map(|k| Box::new(text(k)) as Box<dyn Val + 'b>)
                        .collect()
                };
                CowVal::owned(CelList::from(keys))
            }
            "properties" => {
                let mut map: HashMap<CelMapKey<'b>, Box<dyn Val + 'b>> = HashMap::new();
                if !f.properties.is_empty() {
                    for item in f.properties.split(|&b| b == 0x02) {
                        let mut pair = item.splitn(2, |&b| b == 0x01);
                        let name = pair.next().unwrap_or_default();
                        let value = pair.next().unwrap_or_default();
                        map.insert(CelMapKey::String(text(name)), Box::new(text(value)));
                    }
                }
                CowVal::owned(CelMap::from(map))
            }
            "text" => CowVal::owned(text(f.body)),
            "body_size" => CowVal::owned(CelInt::from(f.body.len() as i64)),
            // The interpreter asks for a dotted name whole first: `properties.region` is
            // answered from the record's bytes, with no map made (absent: the map is
            // asked for, and its selection fails as it would).
            qualified if qualified.starts_with("properties.") => {
                let name = &qualified["properties.".len()..];
                if name.contains('.') {
                    return None;
                }
                let value = f.properties.split(|&b| b == 0x02).find_map(|item| {
                    let mut pair = item.splitn(2, |&b| b == 0x01);
                    (pair.next()? == name.as_bytes()).then(|| pair.next().unwrap_or_default())
                })?;
                CowVal::owned(text(value))
            }
            "body" => CowVal::Borrowed(&**self.body.get_or_init(|| json_body(f.body, self.paths))),
            _ => return None,
        })
    }
}

/// The body parsed as JSON, as a CEL value keeping what `paths` reaches (`null` when
/// it is not JSON).
fn json_body(body: &[u8], paths: &Paths) -> Box<dyn Val + 'static> {
    let done = std::cell::RefCell::new(None);
    let mut reader = serde_json::Deserializer::from_slice(body);
    let picked = Pick {
        paths,
        depth: 0,
        done: Some(&done),
    }
    .deserialize(&mut reader);
    match picked {
        Ok(value) if reader.end().is_ok() => value,
        Ok(_) => Box::new(CelNull),
        Err(_) => done.into_inner().unwrap_or_else(|| Box::new(CelNull)),
    }
}

/// The error that stops reading a body once every member it reaches was found.
const DONE: &str = "tidemark: every member reached";

/// Deserializes JSON into a CEL value, keeping the members of objects that `paths`
/// names and skipping the others unparsed (serde's IgnoredAny: no value made).
/// At the top level (`done` given) reading stops as soon as every member `paths` names
/// was found: the object made so far is put in `done` and an error ends the parse, so
/// the rest of the body is neither read nor checked as JSON (reading "on demand").
struct Pick<'p> {
    paths: &'p Paths,
    depth: usize,
    done: Option<&'p std::cell::RefCell<Option<Box<dyn Val + 'static>>>>,
}

impl<'de> DeserializeSeed<'de> for Pick<'_> {
    type Value = Box<dyn Val + 'static>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        if self.paths.all || self.depth > MAX_JSON_DEPTH {
            let depth = self.depth;
            return serde_json::Value::deserialize(d).map(|v| json_value(v, depth));
        }
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Pick<'_> {
    type Value = Box<dyn Val + 'static>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JSON")
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Box::new(CelNull))
    }

    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Box::new(CelBool::from(v)))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Box::new(CelInt::from(v)))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(match i64::try_from(v) {
            Ok(i) => Box::new(CelInt::from(i)),
            Err(_) => Box::new(CelUInt::from(v)),
        })
    }

    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Box::new(CelDouble::from(v)))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Box::new(CelString::from(v.to_string())))
    }

    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(Box::new(CelString::from(v)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        // Fields selected from a list fail when evaluated; the list is kept whole.
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<serde_json::Value>()? {
            items.push(json_value(item, self.depth + 1));
        }
        Ok(Box::new(CelList::from(items)))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut kept: HashMap<CelMapKey<'static>, Box<dyn Val + 'static>> = HashMap::new();
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match self.paths.children.get(key.as_ref()) {
                Some(child) => {
                    let value = map.next_value_seed(Pick {
                        paths: child,
                        depth: self.depth + 1,
                        done: None,
                    })?;
                    kept.insert(CelMapKey::String(CelString::from(key.into_owned())), value);
                    if let Some(done) = self.done {
                        if kept.len() == self.paths.children.len() {
                            *done.borrow_mut() = Some(Box::new(CelMap::from(kept)));
                            return Err(serde::de::Error::custom(DONE));
                        }
                    }
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Box::new(CelMap::from(kept)))
    }
}

fn json_value(value: serde_json::Value, depth: usize) -> Box<dyn Val + 'static> {
    use serde_json::Value as J;
    if depth > MAX_JSON_DEPTH {
        return Box::new(CelNull);
    }
    match value {
        J::Null => Box::new(CelNull),
        J::Bool(b) => Box::new(CelBool::from(b)),
        J::Number(n) => {
            if let Some(i) = n.as_i64() {
                Box::new(CelInt::from(i))
            } else if let Some(u) = n.as_u64() {
                Box::new(CelUInt::from(u))
            } else {
                Box::new(CelDouble::from(n.as_f64().unwrap_or(f64::NAN)))
            }
        }
        J::String(s) => Box::new(CelString::from(s)),
        J::Array(items) => Box::new(CelList::from(
            items
                .into_iter()
                .map(|item| json_value(item, depth + 1))
                .collect::<Vec<_>>(),
        )),
        J::Object(members) => {
            let map: HashMap<CelMapKey<'static>, Box<dyn Val + 'static>> = members
                .into_iter()
                .map(|(k, v)| {
                    (
                        CelMapKey::String(CelString::from(k)),
                        json_value(v, depth + 1),
                    )
                })
                .collect();
            Box::new(CelMap::from(map))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields<'a>(tag: &'a [u8], body: &'a [u8]) -> Fields<'a> {
        Fields {
            topic: b"orders",
            queue: 3,
            offset: 7,
            commit_offset: 100,
            born_ms: 1_000,
            stored_ms: 2_000,
            tag,
            keys: b"k1\x1fk2",
            properties: b"region\x01eu\x02tier\x01gold",
            body,
        }
    }

    fn eval(source: &str, f: &Fields<'_>) -> Result<bool, String> {
        let filter = Filter::compile(source).expect("compiles");
        let root = filter.context();
        filter.matches_fields(&root, f)
    }

    #[test]
    fn body_json_and_tag() {
        let f = fields(b"paid", br#"{"order": {"total": 120.5}}"#);
        assert_eq!(
            eval(r#"body.order.total > 100 && tag == "paid""#, &f),
            Ok(true)
        );
        assert_eq!(eval(r#"body.order.total > 200"#, &f), Ok(false));
    }

    #[test]
    fn keys_properties_and_numbers() {
        let f = fields(b"", b"plain text");
        assert_eq!(eval(r#"key == "k1" && "k2" in keys"#, &f), Ok(true));
        assert_eq!(eval(r#"properties.region == "eu""#, &f), Ok(true));
        assert_eq!(
            eval(r#"properties.tier == "gold" && size(properties) == 2"#, &f),
            Ok(true)
        );
        assert!(eval(r#"properties.missing == "x""#, &f).is_err());
        assert_eq!(
            eval(r#"!has(properties.missing) && has(properties.tier)"#, &f),
            Ok(true)
        );
        assert_eq!(
            eval(
                r#"queue == 3 && offset == 7 && stored_ms - born_ms == 1000"#,
                &f
            ),
            Ok(true)
        );
        assert_eq!(
            eval(r#"text.contains("plain") && topic == "orders""#, &f),
            Ok(true)
        );
        assert_eq!(eval("body == null", &f), Ok(true));
    }

    #[test]
    fn the_parts_of_the_body_not_reached_are_skipped_yet_what_is_reached_is_whole() {
        let body = br#"{"order": {"total": 5, "lines": [1, 2]}, "pad": "xxxx", "n": 1}"#;
        let f = fields(b"", body);
        assert_eq!(
            eval("body.order.total == 5 && size(body.order) == 2", &f),
            Ok(true)
        );
        assert_eq!(
            eval("has(body.order.lines) && body.order.lines[1] == 2", &f),
            Ok(true)
        );
        assert_eq!(eval("size(body) == 3 && body.pad == 'xxxx'", &f), Ok(true));
        assert_eq!(eval("!has(body.order.missing)", &f), Ok(true));
        assert_eq!(
            eval("[1].all(body, body == 1) && body.n == 1", &f),
            Ok(true)
        );
        let bad = fields(b"", br#"{"order": {"total": 5}} trailing"#);
        assert_eq!(eval("body == null", &bad), Ok(true));
        // Read on demand: once `order` is found the rest is not read.
        let torn = fields(b"", br#"{"order": {"total": 5}, "pad": "xx"#);
        assert_eq!(eval("body.order.total == 5", &torn), Ok(true));
        assert_eq!(eval("body == null", &torn), Ok(true));
    }

    #[test]
    fn missing_field_is_an_error_not_a_match() {
        let f = fields(b"", b"{}");
        assert!(eval("body.order.total > 1", &f).is_err());
    }

    #[test]
    fn unknown_name_fails_with_its_position() {
        let error = Filter::compile("tag == 'a' && colour == 'red'").unwrap_err();
        assert_eq!(error.position, 14);
        assert!(error.message.contains("colour"));
    }

    #[test]
    fn syntax_error_has_a_position() {
        let error = Filter::compile("tag == ").unwrap_err();
        assert_eq!(error.line, 1);
        assert!(error.position >= 6, "{error:?}");
    }

    #[test]
    fn nested_comprehensions_do_not_compile() {
        assert!(Filter::compile("keys.all(a, keys.all(b, a == b))").is_err());
        assert!(Filter::compile("keys.all(a, a != '')").is_ok());
    }

    #[test]
    fn nesting_past_the_bound_is_refused_where_it_goes_too_deep() {
        let deep = format!("{}1{}", "(".repeat(1000), ")".repeat(1000));
        let error = Filter::compile(&deep).expect_err("refused");
        assert_eq!(error.position, usize::from(MAX_DEPTH));
        let conditionals = "true ? 1 : ".repeat(200) + "0";
        assert!(Filter::compile(&conditionals).is_err());
        let in_text = format!("text == \"{}\"", "(".repeat(1000));
        assert!(Filter::compile(&in_text).is_ok());
        let raw = format!(
            "text == r\"\\\" || {}1{}",
            "(".repeat(1000),
            ")".repeat(1000)
        );
        assert!(Filter::compile(&raw).is_err());
    }

    #[test]
    fn deep_nesting_does_not_compile() {
        let deep = format!("{}1{}", "(".repeat(1000), ")".repeat(1000));
        assert!(Filter::compile(&deep).is_err());
        // The parser folds a run of negations: it compiles, and evaluates.
        let long = "!".repeat(3000) + "true";
        let f = fields(b"", b"");
        assert_eq!(eval(&long, &f), Ok(true));
        let chain = vec!["queue == 3"; 250].join(" && ");
        assert_eq!(eval(&chain, &f), Ok(true));
    }

    mod pre_pass {
        use super::*;
        use proptest::prelude::*;

        fn field() -> impl Strategy<Value = String> {
            prop_oneof![
                Just("tag".to_string()),
                Just("key".to_string()),
                Just("topic".to_string()),
                Just("text".to_string()),
                Just("queue".to_string()),
                Just("offset".to_string()),
                Just("commit_offset".to_string()),
                Just("born_ms".to_string()),
                Just("stored_ms".to_string()),
                Just("body_size".to_string()),
                Just("properties.region".to_string()),
                Just("properties[\"tier\"]".to_string()),
                Just("properties.missing".to_string()),
                Just("properties.re".to_string()),
                Just("properties[\"region\\u0001eu\"]".to_string()),
                Just("properties[\"\"]".to_string()),
                Just("body.order.total".to_string()),
                Just("body.order".to_string()),
                Just("body.n".to_string()),
            ]
        }

        fn literal() -> impl Strategy<Value = String> {
            prop_oneof![
                (-3i64..12).prop_map(|i| i.to_string()),
                Just("1000".to_string()),
                Just("\"paid\"".to_string()),
                Just("\"eu\"".to_string()),
                Just("\"k1\"".to_string()),
                Just("\"\"".to_string()),
                Just("\"orders\"".to_string()),
                Just("5u".to_string()),
                Just("2.5".to_string()),
                Just("true".to_string()),
                Just("null".to_string()),
                Just("\"\\uFFFD\"".to_string()),
                Just("\"k1\\uFFFD\"".to_string()),
                Just("\"é\"".to_string()),
                Just("\"k\"".to_string()),
                Just("\"k1\\u001fk2\"".to_string()),
                Just("\"k1\\u001f\"".to_string()),
                Just("\"region\\u0001eu\"".to_string()),
                Just("\"abcdefghijklmnopq\"".to_string()),
                Just("\"abcdefghijklmnopqr\"".to_string()),
            ]
        }

        fn leaf() -> impl Strategy<Value = String> {
            let op = prop_oneof![
                Just("=="),
                Just("!="),
                Just("<"),
                Just("<="),
                Just(">"),
                Just(">=")
            ];
            prop_oneof![
                4 => (field(), op, literal()).prop_map(|(f, o, l)| format!("{f} {o} {l}")),
                1 => (field(), literal()).prop_map(|(f, l)| format!("{f}.startsWith({l})")),
                1 => Just("keys.size() == 2".to_string()),
            ]
        }

        fn expression() -> impl Strategy<Value = String> {
            leaf().prop_recursive(4, 16, 2, |inner| {
                prop_oneof![
                    (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a}) && ({b})")),
                    (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a}) || ({b})")),
                    inner.prop_map(|a| format!("!({a})")),
                ]
            })
        }

        fn body() -> impl Strategy<Value = Vec<u8>> {
            prop_oneof![
                Just(br#"{"order": {"total": 7, "id": 1}, "pad": "xx"}"#.to_vec()),
                Just(br#"{"order": {"total": 150}, "n": 3}"#.to_vec()),
                Just(br#"{"order": {"total": 2.5}}"#.to_vec()),
                Just(br#"{"order": {"total": "7"}}"#.to_vec()),
                Just(br#"{"order": {"total": 1, "total": 9}}"#.to_vec()),
                Just(br#"{"order": {"total": 5}, "pad": "torn"#.to_vec()),
                Just(br#"{"order": {"total": 5, "x": bad}}"#.to_vec()),
                Just(br#"{"order": 5}"#.to_vec()),
                Just(br#"{"order": {"total": 18446744073709551615}}"#.to_vec()),
                Just(br#"{"n": "paid", "order": {}}"#.to_vec()),
                Just(br#"{"order": {"total": 3}} trailing"#.to_vec()),
                Just(br#"[1, 2]"#.to_vec()),
                Just(b"paid".to_vec()),
                Just(b"\xff\xfe".to_vec()),
                Just(b"".to_vec()),
                // Hostile JSON for the hand-written member reader (fast::json_at).
                Just(br#"{"\u006frder": {"total": 150}, "order": {"total": 7}}"#.to_vec()),
                Just(br#"{"order": {"to\u0074al": 150, "total": 7}}"#.to_vec()),
                Just(br#"{"order": {"total": 7}, "order": {"total": 150}}"#.to_vec()),
                Just(br#"{"order": {"total": -0}}"#.to_vec()),
                Just(br#"{"order": {"total": 1e2}}"#.to_vec()),
                Just(br#"{"order": {"total": 1.0}}"#.to_vec()),
                Just(br#"{"order": {"total": 01}}"#.to_vec()),
                Just(br#"{"order": {"total": -}}"#.to_vec()),
                Just(br#"{"order": {"total": 5,}}"#.to_vec()),
                Just(br#"{"order": {"total": 5 "x": 1}}"#.to_vec()),
                Just(br#"{"order": {"total": 9223372036854775807}}"#.to_vec()),
                Just(br#"{"order": {"total": 9223372036854775808}}"#.to_vec()),
                Just(br#"{"order": {"total": -9223372036854775808}}"#.to_vec()),
                Just(br#"{"order": {"total": -9223372036854775809}}"#.to_vec()),
                Just(br#"{"order": {"total": 123456789012345678901234567890}}"#.to_vec()),
                Just(br#"{"order": {"total": "pa\u0069d"}}"#.to_vec()),
                Just(br#"{"n": "paid"}"#.to_vec()),
                Just(br#"{"n": 5x}"#.to_vec()),
                Just(br#"{"n": 5"#.to_vec()),
                Just(br#"{"x": "\ud800", "order": {"total": 5}}"#.to_vec()),
                Just(br#"{"x": 1e999, "order": {"total": 5, "y": [1, {"z": null}]}}"#.to_vec()),
                Just(b"{\"x\": \"\xff\", \"order\": {\"total\": 5}}".to_vec()),
                Just(b"{\"order\": {\"y\": \"\xff\", \"total\": 5}}".to_vec()),
                Just(b"{\"\xff\": 1, \"order\": {\"total\": 5}}".to_vec()),
                Just(b"{\"x\": \"a\tb\", \"order\": {\"total\": 5}}".to_vec()),
                Just(b"\xef\xbb\xbf{\"order\": {\"total\": 5}}".to_vec()),
                Just(b" \r\n\t{ \"order\" :\n{ \"total\" : 5 } }".to_vec()),
                Just(
                    [
                        &b"{\"x\": "[..],
                        &b"["[..].repeat(40),
                        &b"]"[..].repeat(40),
                        &br#", "order": {"total": 5}}"#[..]
                    ]
                    .concat()
                ),
                Just(
                    [
                        &b"{\"x\": "[..],
                        &b"["[..].repeat(200),
                        &b"]"[..].repeat(200),
                        &br#", "order": {"total": 5}}"#[..]
                    ]
                    .concat()
                ),
                Just(
                    [
                        &br#"{"order": {"total": 5, "x": "#[..],
                        &b"["[..].repeat(200),
                        &b"]"[..].repeat(200),
                        &b"}}"[..]
                    ]
                    .concat()
                ),
            ]
        }

        /// `cases`, times `TIDEMARK_FUZZ_SCALE` when set (`make soak` runs it at 10×).
        fn scaled(cases: u32) -> u32 {
            std::env::var("TIDEMARK_FUZZ_SCALE")
                .ok()
                .and_then(|scale| scale.parse::<f64>().ok())
                .map_or(cases, |scale| {
                    (f64::from(cases) * scale).round().max(1.0) as u32
                })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(scaled(1000)))]
            /// Whatever the pre-pass answers, CEL answers the same; where CEL fails,
            /// the pre-pass is not sure (so CEL decides, error and sentence included).
            #[test]
            fn the_pre_pass_agrees_with_cel(
                source in expression(),
                tag in prop_oneof![Just(&b"paid"[..]), Just(&b""[..]), Just(&b"\xff"[..]), Just(&b"open"[..]), Just("\u{FFFD}".as_bytes())],
                keys in prop_oneof![
                    Just(&b"k1\x1fk2"[..]), Just(&b""[..]), Just(&b"k10"[..]), Just(&b"k1\xff"[..]),
                    Just(&b"\xffk1"[..]), Just(&b"k"[..]), Just(&b"k1"[..]), Just(&b"k1\x1f"[..]),
                    Just(&b"\x1fk1"[..]), Just(&b"abcdefghijklmnopq"[..]),
                    Just(&b"abcdefghijklmnopqr\x1fk1"[..]),
                ],
                properties in prop_oneof![
                    Just(&b"region\x01eu\x02tier\x01gold"[..]),
                    Just(&b""[..]),
                    Just(&b"region\x01us"[..]),
                    Just(&b"region\x01eu\x02region\x01us"[..]),
                    Just(&b"region\x01e\xff\x02tier\x01\xffgold"[..]),
                    // Names and items the in-place look-up must not mistake.
                    Just(&b"region"[..]),
                    Just(&b"regionx\x01eu\x02re\x01k1"[..]),
                    Just(&b"tier\x01gold\x02region\x01eu\x02"[..]),
                    Just(&b"\x02region\x01eu"[..]),
                    Just(&b"region\x01eu\x01us"[..]),
                    Just(&b"region\x01\x02region"[..]),
                    Just(&b"\x01eu\x02region\x01abcdefghijklmnopq"[..]),
                ],
                body in body(),
                queue in 0u32..5,
                offset in prop_oneof![Just(0u64), Just(7u64), Just(u64::MAX)],
            ) {
                let Ok(filter) = Filter::compile(&source) else { return Ok(()); };
                let f = Fields {
                    topic: b"orders",
                    queue,
                    offset,
                    commit_offset: 100,
                    born_ms: -5,
                    stored_ms: 2_000,
                    tag,
                    keys,
                    properties,
                    body: &body,
                };
                let root = filter.context();
                let cel = filter.matches_cel(&root, &f);
                if let Some(fast) = &filter.fast {
                    if let Some(answer) = fast.eval(&f, &mut None) {
                        prop_assert_eq!(Ok(answer), cel.clone(), "{}", source);
                    }
                }
                prop_assert_eq!(filter.matches_fields(&root, &f), cel, "{}", source);
            }
        }

        /// The first key and a property are read in place (`fast::key_is`,
        /// `fast::property_of`): every key, prefix and property look-up against CEL's
        /// answer over keys and properties that share prefixes, lack a value, repeat
        /// a name or end in a separator.
        #[test]
        fn keys_and_properties_read_in_place_answer_as_cel() {
            let keys: [&[u8]; 11] = [
                b"",
                b"k",
                b"k1",
                b"k10",
                b"k1\x1f",
                b"k1\x1fk2",
                b"\x1fk1",
                b"k10\x1fk1",
                b"k1\xff",
                b"abcdefghijklmnopq",
                b"abcdefghijklmnopqr\x1fk1",
            ];
            let properties: [&[u8]; 12] = [
                b"",
                b"region",
                b"region\x01",
                b"region\x01eu",
                b"region\x01eu\x02",
                b"regionx\x01eu\x02re\x01k1",
                b"tier\x01gold\x02region\x01eu",
                b"\x02region\x01eu",
                b"region\x01eu\x01us",
                b"region\x01eu\x02region\x01eu",
                b"\x01eu\x02region\x01abcdefghijklmnopq",
                b"re\x01\x02region\x01e",
            ];
            let mut sources = Vec::new();
            for literal in ["", "k", "k1", "k10", "abcdefghijklmnopq", "eu", "e", "gold"] {
                sources.push(format!("key == {literal:?}"));
                sources.push(format!("key != {literal:?}"));
                sources.push(format!("key.startsWith({literal:?})"));
                for name in ["region", "re", "regionx", "tier", ""] {
                    sources.push(format!("properties[{name:?}] == {literal:?}"));
                    sources.push(format!("properties[{name:?}] != {literal:?}"));
                    sources.push(format!("properties[{name:?}].startsWith({literal:?})"));
                }
            }
            let mut answered = 0;
            for source in &sources {
                let filter = Filter::compile(source).expect("compiles");
                let fast = filter.fast.as_ref().expect("taken");
                let root = filter.context();
                for k in keys {
                    for p in properties {
                        let mut f = fields(b"paid", b"{}");
                        f.keys = k;
                        f.properties = p;
                        let cel = filter.matches_cel(&root, &f);
                        if let Some(answer) = fast.eval(&f, &mut None) {
                            answered += 1;
                            assert_eq!(Ok(answer), cel, "{source} on {k:?}, {p:?}");
                        }
                        assert_eq!(filter.matches_fields(&root, &f), cel, "{source}");
                    }
                }
            }
            // A third or more are the pre-pass's own (a missing or twice-named
            // property is CEL's).
            assert!(
                answered > sources.len() * keys.len() * properties.len() / 3,
                "{answered}"
            );
        }

        /// The scan passes over records of another tag when a `tag == "…"` is among
        /// the top-level `&&`s: CEL answers false for them whatever the rest gives,
        /// an error included.
        #[test]
        fn a_required_tag_is_one_cel_answers_false_without() {
            for (source, tag) in [
                (r#"tag == "paid" && body.order.total > 100"#, Some("paid")),
                (r#"body.order.total > 100 && tag == "paid""#, Some("paid")),
                (
                    r#"(queue == 1 && tag == "paid") && key != "" "#,
                    Some("paid"),
                ),
                (r#"tag == "paid" || queue == 1"#, None),
                (r#"!(tag == "paid") && queue == 1"#, None),
                (r#"tag != "paid" && queue == 1"#, None),
                (r#"tag == "" && queue == 1"#, None),
                (r#"tag == "\uFFFD" && queue == 1"#, None),
                (r#"has(body.x) && tag == "paid""#, Some("paid")), // CEL for the rest
            ] {
                let filter = Filter::compile(source).expect("compiles");
                let want = tag.map(|t| (crate::tags::tag_hash(t.as_bytes()), t.as_bytes()));
                assert_eq!(filter.tag(), want, "{source}");
                if tag.is_some() {
                    // Another tag, a body that fails the rest: CEL says false.
                    let f = fields(b"open", b"not json");
                    let root = filter.context();
                    assert_eq!(filter.matches_cel(&root, &f), Ok(false), "{source}");
                }
            }
        }

        #[test]
        fn the_common_shapes_are_taken() {
            for source in [
                r#"tag == "paid" && body.order.total > 100"#,
                r#"body.order.total > 100 && tag == "paid""#,
                r#"properties.region == "eu" && key.startsWith("k1")"#,
                r#"!(queue == 3) || properties["tier"] != "gold""#,
            ] {
                let filter = Filter::compile(source).expect("compiles");
                let fast = filter.fast.as_ref().expect("taken");
                assert!(!format!("{fast:?}").contains("Cel"), "{source}: {fast:?}");
            }
        }
    }
}
