//! The typed pre-pass: the common shapes of an expression — a field of the record
//! compared with a literal (`tag == "paid"`, `queue >= 2`, `properties.region == "eu"`,
//! `properties["region"] != "us"`, `key.startsWith("k1")`, `body.order.total > 100`),
//! joined by `&&`, `||` and `!` — evaluated directly on the record's bytes, with no CEL
//! value made and no interpreter.
//!
//! Every node answers `Some(bool)` only when it is sure CEL gives that bool; anything
//! else (a type that does not compare, a missing property or JSON member, text that is
//! not UTF-8, a shape not listed above) is `None`, and the record is then evaluated by
//! CEL, so results, errors and their sentences are CEL's own. `&&` and `||` are sure
//! only when the left side decides, or both sides are sure (no error-absorbing rule of
//! CEL is relied on).

use cel::common::ast::{operators, Expr, IdedExpr, LiteralValue};
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;

use super::{Fields, Paths};

/// The longest `body.a.b...` chain taken (well inside the JSON depth bound).
const MAX_BODY_PATH: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Op {
    fn of(name: &str) -> Option<Op> {
        Some(match name {
            operators::EQUALS => Op::Eq,
            operators::NOT_EQUALS => Op::Ne,
            operators::LESS => Op::Lt,
            operators::LESS_EQUALS => Op::Le,
            operators::GREATER => Op::Gt,
            operators::GREATER_EQUALS => Op::Ge,
            _ => return None,
        })
    }

    fn holds(self, order: std::cmp::Ordering) -> bool {
        use std::cmp::Ordering::*;
        match self {
            Op::Eq => order == Equal,
            Op::Ne => order != Equal,
            Op::Lt => order == Less,
            Op::Le => order != Greater,
            Op::Gt => order == Greater,
            Op::Ge => order != Less,
        }
    }
}

/// A field of the record a node reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Field {
    Topic,
    Tag,
    Key,
    Text,
    Property(String),
    Queue,
    Offset,
    CommitOffset,
    BornMs,
    StoredMs,
    BodySize,
    /// `body.a.b`: the members' names.
    Body(Vec<String>),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    Int(i64),
    Str(String),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    And(Box<Node>, Box<Node>),
    Or(Box<Node>, Box<Node>),
    Not(Box<Node>),
    Compare(Field, Op, Literal),
    StartsWith(Field, String),
    /// A shape the pre-pass does not take: CEL decides.
    Cel,
}

/// The pre-pass of `expr`, or None when no part of it is taken. `paths` is the body's
/// parts the whole expression reaches: a `body` chain is taken only when it is the one
/// part reached (so reading it stops where CEL's reading stops).
pub fn compile(expr: &IdedExpr, paths: &Paths) -> Option<Node> {
    let node = node(expr, paths, 0);
    (node != Node::Cel).then_some(node)
}

fn node(expr: &IdedExpr, paths: &Paths, depth: usize) -> Node {
    if depth > 64 {
        return Node::Cel;
    }
    let Expr::Call(call) = &expr.expr else {
        return Node::Cel;
    };
    let args = &call.args;
    match (call.func_name.as_str(), &call.target, args.len()) {
        (operators::LOGICAL_AND, None, 2) | (operators::LOGICAL_OR, None, 2) => {
            let left = node(&args[0], paths, depth + 1);
            let right = node(&args[1], paths, depth + 1);
            if left == Node::Cel && right == Node::Cel {
                return Node::Cel;
            }
            if call.func_name == operators::LOGICAL_AND {
                Node::And(Box::new(left), Box::new(right))
            } else {
                Node::Or(Box::new(left), Box::new(right))
            }
        }
        (operators::LOGICAL_NOT, None, 1) => match node(&args[0], paths, depth + 1) {
            Node::Cel => Node::Cel,
            inner => Node::Not(Box::new(inner)),
        },
        ("startsWith", Some(target), 1) => match (field(target, paths), literal(&args[0])) {
            (Some(f), Some(Literal::Str(s))) if f.is_text() => Node::StartsWith(f, s),
            _ => Node::Cel,
        },
        (name, None, 2) => {
            let Some(op) = Op::of(name) else {
                return Node::Cel;
            };
            match (field(&args[0], paths), literal(&args[1])) {
                (Some(f), Some(lit)) => {
                    let fits = match &lit {
                        // Strings: equality only (ordering of text left to CEL).
                        Literal::Str(_) => {
                            matches!(op, Op::Eq | Op::Ne) && (f.is_text() || f.is_body())
                        }
                        Literal::Int(_) => f.is_int() || f.is_body(),
                    };
                    if fits {
                        Node::Compare(f, op, lit)
                    } else {
                        Node::Cel
                    }
                }
                _ => Node::Cel,
            }
        }
        _ => Node::Cel,
    }
}

impl Field {
    fn is_text(&self) -> bool {
        matches!(
            self,
            Field::Topic | Field::Tag | Field::Key | Field::Text | Field::Property(_)
        )
    }

    fn is_int(&self) -> bool {
        matches!(
            self,
            Field::Queue
                | Field::Offset
                | Field::CommitOffset
                | Field::BornMs
                | Field::StoredMs
                | Field::BodySize
        )
    }

    fn is_body(&self) -> bool {
        matches!(self, Field::Body(_))
    }
}

fn literal(expr: &IdedExpr) -> Option<Literal> {
    match &expr.expr {
        Expr::Literal(LiteralValue::Int(i)) => Some(Literal::Int(*i.inner())),
        Expr::Literal(LiteralValue::String(s)) => Some(Literal::Str(s.inner().to_string())),
        _ => None,
    }
}

fn field(expr: &IdedExpr, paths: &Paths) -> Option<Field> {
    match &expr.expr {
        Expr::Ident(name) => Some(match name.as_str() {
            "topic" => Field::Topic,
            "tag" => Field::Tag,
            "key" => Field::Key,
            "text" => Field::Text,
            "queue" => Field::Queue,
            "offset" => Field::Offset,
            "commit_offset" => Field::CommitOffset,
            "born_ms" => Field::BornMs,
            "stored_ms" => Field::StoredMs,
            "body_size" => Field::BodySize,
            _ => return None,
        }),
        Expr::Select(select) if !select.test => match &select.operand.expr {
            Expr::Ident(name) if name == "properties" => {
                Some(Field::Property(select.field.clone()))
            }
            _ => {
                let path = super::body_path(expr)?;
                (!path.is_empty() && path.len() <= MAX_BODY_PATH && only_chain(paths, &path))
                    .then_some(Field::Body(path))
            }
        },
        Expr::Call(call)
            if call.func_name == operators::INDEX
                && call.target.is_none()
                && call.args.len() == 2
                && matches!(&call.args[0].expr, Expr::Ident(n) if n == "properties") =>
        {
            match literal(&call.args[1])? {
                Literal::Str(name) => Some(Field::Property(name)),
                Literal::Int(_) => None,
            }
        }
        _ => None,
    }
}

/// Whether `paths` is exactly the chain `path` (the body reached nowhere else).
fn only_chain(paths: &Paths, path: &[String]) -> bool {
    let mut at = paths;
    for name in path {
        if at.all || at.children.len() != 1 {
            return false;
        }
        match at.children.get(name) {
            Some(child) => at = child,
            None => return false,
        }
    }
    at.all && at.children.is_empty()
}

/// A scalar read from a JSON body.
pub enum Json {
    Int(i64),
    Str(String),
    /// Anything else (a double, uint, bool, null, list, object): CEL decides.
    Other,
}

impl Node {
    /// The record's answer when sure (see the module's text).
    pub fn eval(&self, f: &Fields<'_>, body: &mut BodyCache) -> Option<bool> {
        match self {
            Node::Cel => None,
            Node::And(a, b) => match a.eval(f, body)? {
                false => Some(false),
                true => b.eval(f, body),
            },
            Node::Or(a, b) => match a.eval(f, body)? {
                true => Some(true),
                false => b.eval(f, body),
            },
            Node::Not(a) => a.eval(f, body).map(|v| !v),
            Node::StartsWith(field, prefix) => {
                let text = text_of(field, f)?;
                Some(text.starts_with(prefix.as_str()))
            }
            Node::Compare(field, op, lit) => match (lit, field) {
                (Literal::Int(want), Field::Body(path)) => {
                    match body.get_or_insert_with(|| json_at(f.body, path)) {
                        Some(Json::Int(have)) => Some(op.holds((*have).cmp(want))),
                        _ => None,
                    }
                }
                (Literal::Str(want), Field::Body(path)) => {
                    match body.get_or_insert_with(|| json_at(f.body, path)) {
                        Some(Json::Str(have)) => Some(op.holds(have.as_str().cmp(want.as_str()))),
                        _ => None,
                    }
                }
                (Literal::Int(want), _) => Some(op.holds(int_of(field, f)?.cmp(want))),
                (Literal::Str(want), _) => Some(op.holds(text_of(field, f)?.cmp(want.as_str()))),
            },
        }
    }
}

pub type BodyCache = Option<Option<Json>>;

fn text_of<'a>(field: &Field, f: &Fields<'a>) -> Option<&'a str> {
    let bytes: &'a [u8] = match field {
        Field::Topic => f.topic,
        Field::Tag => f.tag,
        Field::Key => f.keys.split(|&b| b == 0x1f).next().unwrap_or_default(),
        Field::Text => f.body,
        Field::Property(name) => {
            if f.properties.is_empty() {
                return None;
            }
            // Named once (a name given twice: which value CEL sees is left to CEL).
            let mut values = f.properties.split(|&b| b == 0x02).filter_map(|item| {
                let mut pair = item.splitn(2, |&b| b == 0x01);
                (pair.next()? == name.as_bytes()).then(|| pair.next().unwrap_or_default())
            });
            let value = values.next()?;
            if values.next().is_some() {
                return None;
            }
            value
        }
        _ => return None,
    };
    std::str::from_utf8(bytes).ok()
}

fn int_of(field: &Field, f: &Fields<'_>) -> Option<i64> {
    let wide = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    Some(match field {
        Field::Queue => i64::from(f.queue),
        Field::Offset => wide(f.offset),
        Field::CommitOffset => wide(f.commit_offset),
        Field::BornMs => f.born_ms,
        Field::StoredMs => f.stored_ms,
        Field::BodySize => f.body.len() as i64,
        _ => return None,
    })
}

/// The member at `path` of the JSON body, read as the evaluator reads it (`Pick`): the
/// top-level object is read until its one member named is found (the rest unread), the
/// objects below it whole; None when it is not there, a member named twice, or the
/// JSON is bad before the member is found (CEL then decides).
fn json_at(body: &[u8], path: &[String]) -> Option<Json> {
    let mut reader = serde_json::Deserializer::from_slice(body);
    let mut found = None;
    let stopped = std::cell::Cell::new(false);
    let seed = Seek {
        path,
        top: Some(&stopped),
        found: &mut found,
    };
    match seed.deserialize(&mut reader) {
        // Stopped at the member (top level): the rest is not read, as in `Pick`.
        _ if stopped.get() => found,
        Ok(true) if reader.end().is_ok() => found,
        _ => None,
    }
}

/// Looks for `path` in an object; `Ok(true)` when every object on the way was read
/// whole with the member found once.
struct Seek<'p, 'f> {
    path: &'p [String],
    /// At the top level: set when reading stops at the member found.
    top: Option<&'f std::cell::Cell<bool>>,
    found: &'f mut Option<Json>,
}

impl<'de> DeserializeSeed<'de> for Seek<'_, '_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        match self.path.split_first() {
            None => {
                let value = serde_json::Value::deserialize(d)?;
                *self.found = Some(match value {
                    serde_json::Value::Number(n) => match n.as_i64() {
                        Some(i) => Json::Int(i),
                        None => Json::Other,
                    },
                    serde_json::Value::String(s) => Json::Str(s),
                    _ => Json::Other,
                });
                Ok(true)
            }
            Some(_) => d.deserialize_any(self),
        }
    }
}

impl<'de> Visitor<'de> for Seek<'_, '_> {
    type Value = bool;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JSON")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let Some((first, rest)) = self.path.split_first() else {
            return Ok(false);
        };
        let mut seen = false;
        let mut whole = true;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if key.as_ref() == first.as_str() {
                if seen {
                    // Named twice: which one CEL keeps is left to CEL.
                    *self.found = None;
                    return Ok(false);
                }
                seen = true;
                whole &= map.next_value_seed(Seek {
                    path: rest,
                    top: None,
                    found: &mut *self.found,
                })?;
                if let Some(stopped) = self.top {
                    if whole && self.found.is_some() {
                        // Left unread: serde_json then fails on the rest (a cheap
                        // error, no message made), and `json_at` keeps what was found.
                        stopped.set(true);
                        return Ok(true);
                    }
                    *self.found = None;
                    return Ok(false);
                }
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        if !(seen && whole) {
            *self.found = None;
        }
        Ok(seen && whole)
    }

    // Any other value where an object is wanted: not found (CEL's selection fails).
    fn visit_bool<E>(self, _: bool) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_i64<E>(self, _: i64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_u64<E>(self, _: u64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_f64<E>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_str<E>(self, _: &str) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_unit<E>(self) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(false)
    }
}
