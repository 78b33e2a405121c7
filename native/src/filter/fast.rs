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
    /// A property: its name and the U+0001 that ends a name in a record.
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
    /// `key.startsWith(p)`: the keys' bytes start with `p` (`plain`: no U+001F in it).
    KeyStarts(Box<[u8]>),
    /// `properties.name == value` (`eq`) or `!=`, on bytes: the property found in place
    /// (`property_of`), the name held with the U+0001 that ends it in a record.
    PropertyIs {
        name: Box<[u8]>,
        value: Box<[u8]>,
        eq: bool,
    },
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
            (Some(Field::Key), Some(Literal::Str(s))) if plain(&Field::Key, &s) => {
                Node::KeyStarts(s.into_bytes().into())
            }
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
                        match (f, lit) {
                            (Field::Property(name_end), Literal::Str(value)) => Node::PropertyIs {
                                name: name_end.into_bytes().into(),
                                value: value.into_bytes().into(),
                                eq: op == Op::Eq,
                            },
                            (f, lit) => Node::Compare(f, op, lit),
                        }
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
    (!name.contains([REPLACEMENT, NAME_END, ITEM_END]))
        .then(|| Field::Property(format!("{name}{NAME_END}")))
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
    /// The record's answer when sure (see the module's text). A chain of `&&`s or
    /// `||`s is followed in a loop, its leaves evaluated in place (no call a leaf).
    pub fn eval<'a>(&self, f: &Fields<'a>, body: &mut BodyCache<'a>) -> Option<bool> {
        let mut node = self;
        loop {
            match node {
                Node::And(a, b) => {
                    if !a.side(f, body)? {
                        return Some(false);
                    }
                    node = b;
                }
                Node::Or(a, b) => {
                    if a.side(f, body)? {
                        return Some(true);
                    }
                    node = b;
                }
                leaf => return leaf.leaf(f, body),
            }
        }
    }

    /// The left side of an `&&` or `||`: a leaf in place, a chain by `eval`.
    #[inline(always)]
    fn side<'a>(&self, f: &Fields<'a>, body: &mut BodyCache<'a>) -> Option<bool> {
        match self {
            Node::And(..) | Node::Or(..) => self.eval(f, body),
            leaf => leaf.leaf(f, body),
        }
    }

    /// A node other than `&&` and `||`: a key's prefix and a property's value in place,
    /// the others by `other_leaf`. Kept apart, the other leaves' reads of the record's
    /// fields are not hoisted into every evaluation (before, `eval` loaded and spilled
    /// them all on entry: ~45 of the property case's 126 instructions a record).
    #[inline(always)]
    fn leaf<'a>(&self, f: &Fields<'a>, body: &mut BodyCache<'a>) -> Option<bool> {
        match self {
            Node::KeyStarts(p) => {
                Some(f.keys.len() >= p.len() && same_bytes(&f.keys[..p.len()], p))
            }
            Node::PropertyIs { name, value, eq } => {
                Some(same_bytes(property_of(f.properties, name)?, value) == *eq)
            }
            _ => self.other_leaf(f, body),
        }
    }

    /// A leaf other than `KeyStarts` and `PropertyIs` (see `leaf`).
    #[inline(never)]
    fn other_leaf<'a>(&self, f: &Fields<'a>, body: &mut BodyCache<'a>) -> Option<bool> {
        match self {
            Node::Cel => None,
            Node::And(..) | Node::Or(..) => self.eval(f, body),
            Node::Not(a) => a.eval(f, body).map(|v| !v),
            Node::KeyStarts(..) | Node::PropertyIs { .. } => self.leaf(f, body),
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

/// The value of the property named `name_end` without its last byte (`name_end` is the
/// name, without U+0001 or U+0002, and U+0001) in `properties` (name U+0001 value,
/// joined by U+0002), found in place: None when it is not there, or named more than
/// once (which value CEL sees is then left to CEL). An item without U+0001 is a name
/// with the empty value.
#[inline(always)]
fn property_of<'a>(properties: &'a [u8], name_end: &[u8]) -> Option<&'a [u8]> {
    let n = name_end.len() - 1;
    // The common record: its first item is the one, and the only one (its value holds
    // no U+0002). One compare of the name and its end, one search.
    if properties.len() > n && same_bytes(&properties[..=n], name_end) {
        let value = &properties[n + 1..];
        if find_byte(value, ITEM_END as u8).is_none() {
            return Some(value);
        }
    }
    let name = &name_end[..n];
    if properties.is_empty() {
        return None;
    }
    let mut found = None;
    let mut at = 0;
    loop {
        let rest = &properties[at..];
        let end = find_byte(rest, ITEM_END as u8).unwrap_or(rest.len());
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
        at += end + 1;
    }
}

/// The index of the first `byte` in `s`: eight bytes a step as one word (a byte equal
/// to `byte` is a zero byte of the word XOR `byte` repeated, and the lowest byte the
/// zero-byte test flags is the first such: a borrow only runs upwards from a zero byte),
/// the last under eight bytes as one word too (the last eight again when there are
/// eight, else the bytes put in a word of bytes that are not `byte`).
#[inline]
fn find_byte(s: &[u8], byte: u8) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let pattern = ONES * u64::from(byte);
    let first = |word: u64| {
        let x = word ^ pattern;
        let zero = x.wrapping_sub(ONES) & !x & HIGHS;
        (zero != 0).then(|| (zero.trailing_zeros() / 8) as usize)
    };
    let word = |at: usize| u64::from_le_bytes(s[at..at + 8].try_into().unwrap_or_default());
    let n = s.len();
    if n < 8 {
        return s.iter().position(|&b| b == byte);
    }
    let mut at = 0;
    while at + 8 <= n {
        if let Some(i) = first(word(at)) {
            return Some(at + i);
        }
        at += 8;
    }
    // The last bytes, in the word of the last eight (those before `at` are not `byte`).
    (at < n)
        .then(|| first(word(n - 8)).map(|i| n - 8 + i))
        .flatten()
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
        Field::Property(name_end) => property_of(f.properties, name_end.as_bytes())?,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The word-at-a-time search against `position`: every length 0–40, the byte at
    /// every place (and once more after it), bytes around it that differ by one bit,
    /// and bytes with the high bit set (which the zero-byte test must not flag).
    #[test]
    fn find_byte_is_position() {
        for byte in [0u8, 1, 2, 0x1f, 0x80, 0xff] {
            for len in 0..=40 {
                for fill in [byte ^ 1, byte ^ 0x80, byte.wrapping_add(1), 0xfe, 0] {
                    if fill == byte {
                        continue;
                    }
                    let plain = vec![fill; len];
                    assert_eq!(find_byte(&plain, byte), None, "{byte} {len} {fill}");
                    for at in 0..len {
                        let mut s = plain.clone();
                        s[at] = byte;
                        assert_eq!(find_byte(&s, byte), Some(at), "{byte} {len} {fill} {at}");
                        for later in at + 1..len {
                            let mut t = s.clone();
                            t[later] = byte;
                            assert_eq!(find_byte(&t, byte), Some(at));
                        }
                    }
                }
            }
        }
    }

    /// The property found in place, its first-item shortcut included, against a
    /// split of the items: missing, named twice, the first of several, a value
    /// holding U+0001, names that are prefixes of each other, the empty name.
    #[test]
    fn property_of_is_the_one_item_so_named() {
        let split = |properties: &[u8], name: &[u8]| -> Option<Vec<u8>> {
            if properties.is_empty() {
                return None;
            }
            let mut found = None;
            for item in properties.split(|&b| b == 2) {
                let (n, v) = match item.iter().position(|&b| b == 1) {
                    Some(at) => (&item[..at], &item[at + 1..]),
                    None => (item, &b""[..]),
                };
                if n == name {
                    if found.is_some() {
                        return None;
                    }
                    found = Some(v.to_vec());
                }
            }
            found
        };
        let lists: [&[u8]; 14] = [
            b"",
            b"region",
            b"region\x01",
            b"region\x01eu",
            b"region\x01eu\x02",
            b"region\x01eu\x02region\x01us",
            b"region\x01eu\x02tier\x01gold",
            b"tier\x01gold\x02region\x01eu",
            b"regionx\x01eu\x02re\x01k1",
            b"region\x01eu\x01us",
            b"region\x01a-long-value-of-many-words\x02tier\x01gold-and-more-words",
            b"\x01eu\x02region\x01e",
            b"\x02\x02region\x01eu\x02",
            b"re\x01\x02region\x01e",
        ];
        for properties in lists {
            for name in [&b"region"[..], b"re", b"regionx", b"tier", b""] {
                let mut name_end = name.to_vec();
                name_end.push(1);
                assert_eq!(
                    property_of(properties, &name_end).map(<[u8]>::to_vec),
                    split(properties, name),
                    "{properties:?} {name:?}"
                );
            }
        }
    }
}
