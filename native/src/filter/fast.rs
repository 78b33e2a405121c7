//! The typed pre-pass: the common shapes of an expression — a field of the record
//! compared with a literal (`tag == "paid"`, `queue >= 2`, `properties.region == "eu"`,
//! `properties["region"] != "us"`, `key.startsWith("k1")`, `body.order.total > 100`),
//! joined by `&&`, `||` and `!` — evaluated directly on the record's bytes, with no CEL
//! value made and no interpreter.
//!
//! Every node answers `Some(bool)` only when it is sure CEL gives that bool; anything
//! else (a type that does not compare, a missing property or JSON member, JSON the
//! member reader is not sure of, a shape not listed above) is `None`, and the record is
//! then evaluated by CEL, so results, errors and their sentences are CEL's own. `&&` and
//! `||` are sure only when the left side decides, or both sides are sure. Text fields
//! are compared as bytes (`bytes_of`), body members read by hand (`json_at`); the one
//! rule of CEL's relied on is `x && false == false` for any x, an error included
//! (`required_tag`: the scan passes over records of another tag).

use cel::common::ast::{operators, Expr, IdedExpr, LiteralValue};

use super::{Fields, Paths};
use crate::record::same_bytes;

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
            (Some(f), Some(Literal::Str(s))) if f.is_text() && plain(&f, &s) => {
                Node::StartsWith(f, s)
            }
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
                        Literal::Str(s) => {
                            matches!(op, Op::Eq | Op::Ne)
                                && (f.is_body() || (f.is_text() && plain(&f, s)))
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

/// Whether a text field `f` is compared with the literal `s` on bytes: `s` holds no
/// U+FFFD (see `bytes_of`), and for `key` no U+001F (the first key is read in place,
/// `key_is`: a literal holding the separator is left to CEL).
fn plain(f: &Field, s: &str) -> bool {
    !(s.contains(REPLACEMENT) || (*f == Field::Key && s.contains(KEY_SEPARATOR)))
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
            Expr::Ident(name) if name == "properties" => property(select.field.clone()),
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
                Literal::Str(name) => property(name),
                Literal::Int(_) => None,
            }
        }
        _ => None,
    }
}

/// A property by name; not one whose name holds U+FFFD (CEL's map of the properties
/// replaces bytes that are not UTF-8 in names by it: two names may then be one), nor
/// the record's separators U+0001 and U+0002 (`property_of` looks for the name in place).
fn property(name: String) -> Option<Field> {
    (!name.contains([REPLACEMENT, NAME_END, ITEM_END])).then_some(Field::Property(name))
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

/// The tag every match has, when `node` is `&&`s one of which is `tag == "…"`: a record
/// of another tag cannot match (CEL: `x && false` and `false && x` are false whatever x
/// is, an error included), so the scan passes over entries of another tag hash unread.
/// Not for `""` (no tag) nor a literal holding U+FFFD (a tag that is not UTF-8 is
/// compared with its bad bytes replaced).
pub fn required_tag(node: &Node) -> Option<&str> {
    match node {
        Node::And(a, b) => required_tag(a).or_else(|| required_tag(b)),
        Node::Compare(Field::Tag, Op::Eq, Literal::Str(tag))
            if !tag.is_empty() && !tag.contains('\u{FFFD}') =>
        {
            Some(tag)
        }
        _ => None,
    }
}

/// A scalar read from a JSON body (anything else: the pre-pass is not sure).
pub enum Json<'a> {
    Int(i64),
    Str(&'a str),
}

impl Node {
    /// The record's answer when sure (see the module's text).
    pub fn eval<'a>(&self, f: &Fields<'a>, body: &mut BodyCache<'a>) -> Option<bool> {
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
                let (p, text) = (prefix.as_bytes(), text_of(field, f)?);
                Some(text.len() >= p.len() && same_bytes(&text[..p.len()], p))
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
                        Some(Json::Str(have)) => Some(op.holds((*have).cmp(want.as_str()))),
                        _ => None,
                    }
                }
                (Literal::Int(want), _) => Some(op.holds(int_of(field, f)?.cmp(want))),
                (Literal::Str(want), _) => {
                    let want = want.as_bytes();
                    match (op, field) {
                        (Op::Eq | Op::Ne, Field::Key) => {
                            Some(key_is(f.keys, want) == (*op == Op::Eq))
                        }
                        (Op::Eq | Op::Ne, _) => {
                            Some(same_bytes(bytes_of(field, f)?, want) == (*op == Op::Eq))
                        }
                        _ => Some(op.holds(bytes_of(field, f)?.cmp(want))),
                    }
                }
            },
        }
    }
}

pub type BodyCache<'a> = Option<Option<Json<'a>>>;

/// U+FFFD, what CEL's text of a field puts for bytes that are not UTF-8.
const REPLACEMENT: char = '\u{FFFD}';
/// What a record puts between its keys.
const KEY_SEPARATOR: char = '\u{1f}';
/// What a record puts after a property's name, and after each name and value.
const NAME_END: char = '\u{1}';
const ITEM_END: char = '\u{2}';

/// Whether the first key of `keys` (joined by U+001F) is `want`, a literal without
/// U+001F: the key read in place, not split off first.
fn key_is(keys: &[u8], want: &[u8]) -> bool {
    let n = want.len();
    keys.len() >= n
        && same_bytes(&keys[..n], want)
        && (keys.len() == n || keys[n] == KEY_SEPARATOR as u8)
}

/// The bytes a `startsWith` looks at: the text field's, or for `key` all the keys (the
/// prefix holds no U+001F, `plain`: the first key starts with it exactly when the keys
/// do).
fn text_of<'a>(field: &Field, f: &Fields<'a>) -> Option<&'a [u8]> {
    match field {
        Field::Key => Some(f.keys),
        _ => bytes_of(field, f),
    }
}

/// The value of the property `name` (without U+0001 or U+0002) in `properties` (name
/// U+0001 value, joined by U+0002), found in place: None when it is not there, or named
/// more than once (which value CEL sees is then left to CEL). An item without U+0001 is
/// a name with the empty value.
fn property_of<'a>(properties: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    if properties.is_empty() {
        return None;
    }
    let n = name.len();
    let mut found = None;
    let mut rest = properties;
    loop {
        let end = rest
            .iter()
            .position(|&b| b == ITEM_END as u8)
            .unwrap_or(rest.len());
        let item = &rest[..end];
        if item.len() >= n
            && same_bytes(&item[..n], name)
            && (item.len() == n || item[n] == NAME_END as u8)
        {
            if found.is_some() {
                return None;
            }
            found = Some(item.get(n + 1..).unwrap_or_default());
        }
        if end == rest.len() {
            return found;
        }
        rest = &rest[end + 1..];
    }
}

/// The bytes of a text field. Compared as bytes with a literal without U+FFFD (taken
/// only then), they give CEL's answer on the field's text with no UTF-8 check: equal
/// bytes are the literal's own UTF-8, and bytes that are not UTF-8 turn into text
/// holding U+FFFD, which then neither equals nor starts with the literal (a prefix
/// that is UTF-8 is read the same at the start of any text).
fn bytes_of<'a>(field: &Field, f: &Fields<'a>) -> Option<&'a [u8]> {
    let bytes: &'a [u8] = match field {
        Field::Topic => f.topic,
        Field::Tag => f.tag,
        Field::Key => f.keys.split(|&b| b == 0x1f).next().unwrap_or_default(),
        Field::Text => f.body,
        // Named once (a name given twice: which value CEL sees is left to CEL).
        Field::Property(name) => property_of(f.properties, name.as_bytes())?,
        _ => return None,
    };
    Some(bytes)
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
/// top-level object up to its first member so named (the rest unread), the objects
/// below it whole. A hand-written reader of the few bytes needed, no value made.
///
/// It answers only where it is sure the evaluator (serde_json) reads the same: an
/// integer that is an `i64` to serde_json (no fraction, no exponent, no `-0`), a string
/// without escapes. Anything else is None and CEL decides: the member missing or
/// named twice in an object read whole, a key with an escape (it might decode to the
/// name), text that is not UTF-8, a control character or an unusual escape in a
/// string, JSON that is bad, or nested deeper than `MAX_SKIP_DEPTH`, before the member
/// is read, or a top-level member not followed by `,` or `}`.
fn json_at<'a>(body: &'a [u8], path: &[String]) -> Option<Json<'a>> {
    let (first, rest) = path.split_first()?;
    let mut r = Scan { b: body, i: 0 };
    r.ws();
    r.byte(b'{')?;
    r.ws();
    if r.peek()? == b'}' {
        return None; // empty: not found
    }
    loop {
        let key = r.key()?;
        if key == first.as_bytes() {
            let found = r.member(rest, 1)?;
            r.ws();
            return matches!(r.peek()?, b',' | b'}').then_some(found);
        }
        r.skip(1)?;
        if !r.more()? {
            return None; // the object ended without it
        }
    }
}

/// The deepest a skipped value may nest (serde_json's own bound is 128).
const MAX_SKIP_DEPTH: usize = 32;

/// A cursor over a JSON text.
struct Scan<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Scan<'a> {
    #[inline]
    fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    #[inline]
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    #[inline]
    fn byte(&mut self, want: u8) -> Option<()> {
        (self.peek()? == want).then(|| self.i += 1)
    }

    /// After an object's member: `,` (true: another follows) or `}` (false).
    #[inline]
    fn more(&mut self) -> Option<bool> {
        self.ws();
        match self.peek()? {
            b',' => {
                self.i += 1;
                self.ws();
                Some(true)
            }
            b'}' => {
                self.i += 1;
                Some(false)
            }
            _ => None,
        }
    }

    /// A member's key (the cursor at its `"`), its `:` and the blanks after it: the
    /// key's bytes, None when it has an escape or is not plain UTF-8.
    #[inline]
    fn key(&mut self) -> Option<&'a [u8]> {
        let key = self.plain_string()?;
        self.ws();
        self.byte(b':')?;
        self.ws();
        Some(key)
    }

    /// A string without escapes (the cursor at its `"`): its bytes, checked as UTF-8
    /// without control characters.
    #[inline]
    fn plain_string(&mut self) -> Option<&'a [u8]> {
        self.byte(b'"')?;
        let start = self.i;
        let mut high = false;
        loop {
            match *self.b.get(self.i)? {
                b'"' => break,
                b'\\' => return None,
                c if c < 0x20 => return None,
                c => high |= c >= 0x80,
            }
            self.i += 1;
        }
        let text = &self.b[start..self.i];
        self.i += 1;
        if high {
            std::str::from_utf8(text).ok()?;
        }
        Some(text)
    }

    /// The value of the member named along `rest` (the cursor at the value): the leaf
    /// when `rest` is empty, else an object read whole holding the next name once.
    fn member(&mut self, rest: &[String], depth: usize) -> Option<Json<'a>> {
        let Some((name, deeper)) = rest.split_first() else {
            return self.leaf();
        };
        if depth >= MAX_SKIP_DEPTH {
            return None;
        }
        self.byte(b'{')?;
        self.ws();
        if self.peek()? == b'}' {
            return None;
        }
        let mut found = None;
        loop {
            let key = self.key()?;
            if key == name.as_bytes() {
                if found.is_some() {
                    return None; // named twice: which one CEL keeps is left to CEL
                }
                found = Some(self.member(deeper, depth + 1)?);
            } else {
                self.skip(depth + 1)?;
            }
            if !self.more()? {
                return found;
            }
        }
    }

    /// The leaf: an integer serde_json reads as an i64, or a plain string.
    fn leaf(&mut self) -> Option<Json<'a>> {
        match self.peek()? {
            b'"' => {
                let text = self.plain_string()?;
                std::str::from_utf8(text).ok().map(Json::Str)
            }
            b'-' | b'0'..=b'9' => {
                let negative = self.peek() == Some(b'-');
                if negative {
                    self.i += 1;
                }
                let start = self.i;
                while let Some(b'0'..=b'9') = self.peek() {
                    self.i += 1;
                }
                let digits = &self.b[start..self.i];
                // A fraction or exponent (a double), a leading zero (bad JSON), too
                // many digits to be sure: CEL decides.
                if digits.is_empty()
                    || digits.len() > 19
                    || (digits[0] == b'0' && digits.len() > 1)
                    || matches!(self.peek(), Some(b'.' | b'e' | b'E'))
                {
                    return None;
                }
                let magnitude = digits
                    .iter()
                    .fold(0u64, |n, &d| n * 10 + u64::from(d - b'0'));
                if negative {
                    // serde_json: `-0` is a double; -1 ..= -2^63 are i64.
                    if magnitude == 0 || magnitude > 1 << 63 {
                        return None;
                    }
                    Some(Json::Int((magnitude as i64).wrapping_neg()))
                } else {
                    i64::try_from(magnitude).ok().map(Json::Int)
                }
            }
            _ => None,
        }
    }

    /// Pass over one value (the cursor at it), checking it as JSON; None when it is
    /// not, or not surely read the same by serde_json.
    fn skip(&mut self, depth: usize) -> Option<()> {
        if depth >= MAX_SKIP_DEPTH {
            return None;
        }
        match self.peek()? {
            b'"' => self.string(),
            b'{' => {
                self.i += 1;
                self.ws();
                if self.peek()? == b'}' {
                    self.i += 1;
                    return Some(());
                }
                loop {
                    self.key()?;
                    self.skip(depth + 1)?;
                    if !self.more()? {
                        return Some(());
                    }
                }
            }
            b'[' => {
                self.i += 1;
                self.ws();
                if self.peek()? == b']' {
                    self.i += 1;
                    return Some(());
                }
                loop {
                    self.skip(depth + 1)?;
                    self.ws();
                    match self.peek()? {
                        b',' => {
                            self.i += 1;
                            self.ws();
                        }
                        b']' => {
                            self.i += 1;
                            return Some(());
                        }
                        _ => return None,
                    }
                }
            }
            b't' => self.word(b"true"),
            b'f' => self.word(b"false"),
            b'n' => self.word(b"null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn word(&mut self, word: &[u8]) -> Option<()> {
        let end = self.i + word.len();
        (self.b.get(self.i..end)? == word).then(|| self.i = end)
    }

    /// A number by JSON's grammar: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    fn number(&mut self) -> Option<()> {
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek()? {
            b'0' => self.i += 1,
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            self.peek().filter(u8::is_ascii_digit)?;
            self.digits();
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            self.peek().filter(u8::is_ascii_digit)?;
            self.digits();
        }
        Some(())
    }

    #[inline]
    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.i += 1;
        }
    }

    /// A string (the cursor at its `"`), escapes checked: the simple ones and `\u`
    /// with four hex digits outside the surrogates (a surrogate: not sure).
    fn string(&mut self) -> Option<()> {
        self.i += 1;
        let start = self.i;
        let mut high = false;
        loop {
            let c = *self.b.get(self.i)?;
            match c {
                b'"' => break,
                b'\\' => {
                    self.i += 1;
                    match *self.b.get(self.i)? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                        b'u' => {
                            let hex = self.b.get(self.i + 1..self.i + 5)?;
                            let hex = std::str::from_utf8(hex).ok()?;
                            if !hex.bytes().all(|h| h.is_ascii_hexdigit()) {
                                return None;
                            }
                            let unit = u16::from_str_radix(hex, 16).ok()?;
                            if (0xD800..=0xDFFF).contains(&unit) {
                                return None;
                            }
                            self.i += 4;
                        }
                        _ => return None,
                    }
                }
                c if c < 0x20 => return None,
                c => high |= c >= 0x80,
            }
            self.i += 1;
        }
        if high {
            std::str::from_utf8(&self.b[start..self.i]).ok()?;
        }
        self.i += 1;
        Some(())
    }
}
