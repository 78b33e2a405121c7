//! The commit-log record (docs/FORMAT.md, "Record"): its layout in one place, encoding,
//! and the intact-record check with the reasons the Python reference gives.
//!
//! ```text
//! header (56 bytes) | topic | tag | keys | properties | body | crc32c (4) | length (4)
//! ```

/// `TDMR`, little-endian.
pub const RECORD_MAGIC: u32 = u32::from_le_bytes(*b"TDMR");
/// `TDME`, little-endian: the end-of-segment marker.
pub const END_OF_SEGMENT_MAGIC: u32 = u32::from_le_bytes(*b"TDME");
pub const HEADER_SIZE: usize = 56;
pub const TRAILER_SIZE: usize = 8;
pub const RECORD_OVERHEAD: usize = HEADER_SIZE + TRAILER_SIZE;
pub const MARKER_SIZE: usize = 8;
/// The trailer, counted back from a record's end: the CRC32C, then the length again.
pub const CRC_FROM_END: usize = TRAILER_SIZE;
pub const LENGTH_FROM_END: usize = 4;

// Where each header field starts.
const AT_LENGTH: usize = 0;
pub const AT_MAGIC: usize = 4;
const AT_COMMIT_OFFSET: usize = 8;
const AT_QUEUE_OFFSET: usize = 16;
const AT_BORN_MS: usize = 24;
const AT_STORE_MS: usize = 32;
const AT_QUEUE_ID: usize = 40;
const AT_BODY_LEN: usize = 44;
const AT_FLAGS: usize = 48;
const AT_TOPIC_LEN: usize = 50;
const AT_TAG_LEN: usize = 51;
const AT_KEYS_LEN: usize = 52;
const AT_PROPS_LEN: usize = 54;

/// The header's fields in their order on disk: name, byte position, size (the sizes are
/// those of `Header`'s field types). Exported to Python as `_native.record_layout()`, which
/// tests/engine/test_record_layout.py holds to `record.py`'s `HEADER_LAYOUT`.
pub const HEADER_FIELDS: [(&str, usize, usize); 13] = [
    ("length", AT_LENGTH, size_of::<u32>()),
    ("magic", AT_MAGIC, size_of::<u32>()),
    ("commit_offset", AT_COMMIT_OFFSET, size_of::<u64>()),
    ("queue_offset", AT_QUEUE_OFFSET, size_of::<u64>()),
    ("born_ms", AT_BORN_MS, size_of::<i64>()),
    ("store_ms", AT_STORE_MS, size_of::<i64>()),
    ("queue_id", AT_QUEUE_ID, size_of::<u32>()),
    ("body_len", AT_BODY_LEN, size_of::<u32>()),
    ("flags", AT_FLAGS, size_of::<u16>()),
    ("topic_len", AT_TOPIC_LEN, size_of::<u8>()),
    ("tag_len", AT_TAG_LEN, size_of::<u8>()),
    ("keys_len", AT_KEYS_LEN, size_of::<u16>()),
    ("props_len", AT_PROPS_LEN, size_of::<u16>()),
];

/// The 13 fields of a record's header, in their order on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Header {
    pub length: u32,
    pub magic: u32,
    pub commit_offset: u64,
    pub queue_offset: u64,
    pub born_ms: i64,
    pub store_ms: i64,
    pub queue_id: u32,
    pub body_len: u32,
    pub flags: u16,
    pub topic_len: u8,
    pub tag_len: u8,
    pub keys_len: u16,
    pub props_len: u16,
}

fn u16_at(data: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([data[at], data[at + 1]])
}

/// Whether `a` and `b` are the same bytes: the lengths first, then, up to 16 bytes, two
/// overlapping loads of each side (no call into libc's `memcmp`: the names, tags, keys
/// and literals compared per record are mostly that short); longer ones by `==`.
#[inline]
pub fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let w4 = |s: &[u8], i: usize| u32::from_le_bytes(s[i..i + 4].try_into().unwrap_or_default());
    let w8 = |s: &[u8], i: usize| u64::from_le_bytes(s[i..i + 8].try_into().unwrap_or_default());
    match n {
        0 => true,
        1..=3 => a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1],
        4..=7 => w4(a, 0) == w4(b, 0) && w4(a, n - 4) == w4(b, n - 4),
        8..=16 => w8(a, 0) == w8(b, 0) && w8(a, n - 8) == w8(b, n - 8),
        _ => a == b,
    }
}

pub fn u32_at(data: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(data[at..at + 4].try_into().expect("4 bytes"))
}

pub fn u64_at(data: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(data[at..at + 8].try_into().expect("8 bytes"))
}

fn i64_at(data: &[u8], at: usize) -> i64 {
    i64::from_le_bytes(data[at..at + 8].try_into().expect("8 bytes"))
}

impl Header {
    /// The header at the start of `data` (at least `HEADER_SIZE` bytes).
    pub fn parse(data: &[u8]) -> Header {
        let h = &data[..HEADER_SIZE];
        Header {
            length: u32_at(h, AT_LENGTH),
            magic: u32_at(h, AT_MAGIC),
            commit_offset: u64_at(h, AT_COMMIT_OFFSET),
            queue_offset: u64_at(h, AT_QUEUE_OFFSET),
            born_ms: i64_at(h, AT_BORN_MS),
            store_ms: i64_at(h, AT_STORE_MS),
            queue_id: u32_at(h, AT_QUEUE_ID),
            body_len: u32_at(h, AT_BODY_LEN),
            flags: u16_at(h, AT_FLAGS),
            topic_len: h[AT_TOPIC_LEN],
            tag_len: h[AT_TAG_LEN],
            keys_len: u16_at(h, AT_KEYS_LEN),
            props_len: u16_at(h, AT_PROPS_LEN),
        }
    }

    /// The record length the field lengths add up to.
    pub fn fields_length(&self) -> u64 {
        RECORD_OVERHEAD as u64
            + u64::from(self.body_len)
            + u64::from(self.topic_len)
            + u64::from(self.tag_len)
            + u64::from(self.keys_len)
            + u64::from(self.props_len)
    }

    /// Bytes of tag, keys and properties together.
    pub fn extras_len(&self) -> usize {
        usize::from(self.tag_len) + usize::from(self.keys_len) + usize::from(self.props_len)
    }

    /// Write the header into the first `HEADER_SIZE` bytes of `out`.
    pub fn write(&self, out: &mut [u8]) {
        let h = &mut out[..HEADER_SIZE];
        h[AT_LENGTH..AT_LENGTH + 4].copy_from_slice(&self.length.to_le_bytes());
        h[AT_MAGIC..AT_MAGIC + 4].copy_from_slice(&self.magic.to_le_bytes());
        h[AT_COMMIT_OFFSET..AT_COMMIT_OFFSET + 8]
            .copy_from_slice(&self.commit_offset.to_le_bytes());
        h[AT_QUEUE_OFFSET..AT_QUEUE_OFFSET + 8].copy_from_slice(&self.queue_offset.to_le_bytes());
        h[AT_BORN_MS..AT_BORN_MS + 8].copy_from_slice(&self.born_ms.to_le_bytes());
        h[AT_STORE_MS..AT_STORE_MS + 8].copy_from_slice(&self.store_ms.to_le_bytes());
        h[AT_QUEUE_ID..AT_QUEUE_ID + 4].copy_from_slice(&self.queue_id.to_le_bytes());
        h[AT_BODY_LEN..AT_BODY_LEN + 4].copy_from_slice(&self.body_len.to_le_bytes());
        h[AT_FLAGS..AT_FLAGS + 2].copy_from_slice(&self.flags.to_le_bytes());
        h[AT_TOPIC_LEN] = self.topic_len;
        h[AT_TAG_LEN] = self.tag_len;
        h[AT_KEYS_LEN..AT_KEYS_LEN + 2].copy_from_slice(&self.keys_len.to_le_bytes());
        h[AT_PROPS_LEN..AT_PROPS_LEN + 2].copy_from_slice(&self.props_len.to_le_bytes());
    }
}

/// Why a record is not intact, worded as the Python reference (`record.check_record`)
/// words it: scans report these sentences.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Damage {
    HeaderPastEnd,
    BadMagic(u32),
    LengthDisagrees(u32),
    LengthPastEnd(u32),
    TrailingLength { trailing: u32, leading: u32 },
    CrcMismatch,
    WrongOffset(u64),
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Damage::HeaderPastEnd => write!(f, "header runs past the end of the data"),
            Damage::BadMagic(magic) => write!(f, "bad magic 0x{magic:08x}"),
            Damage::LengthDisagrees(length) => {
                write!(f, "length field {length} disagrees with fields")
            }
            Damage::LengthPastEnd(length) => {
                write!(f, "length {length} runs past the end of the data")
            }
            Damage::TrailingLength { trailing, leading } => {
                write!(
                    f,
                    "trailing length {trailing} differs from leading {leading}"
                )
            }
            Damage::CrcMismatch => write!(f, "CRC32C mismatch"),
            Damage::WrongOffset(said) => {
                write!(f, "record says it lives at commit-log offset {said}")
            }
        }
    }
}

/// Check the record at `pos` of `data` (readable up to `data.len()`), which must say it
/// lives at `commit_offset`: the rules of docs/FORMAT.md ("A record is intact"), in their
/// order. Returns its header.
pub fn check(data: &[u8], pos: usize, commit_offset: u64) -> Result<Header, Damage> {
    let limit = data.len();
    if pos.checked_add(HEADER_SIZE).is_none_or(|end| end > limit) {
        return Err(Damage::HeaderPastEnd);
    }
    let header = Header::parse(&data[pos..]);
    if header.magic != RECORD_MAGIC {
        return Err(Damage::BadMagic(header.magic));
    }
    let length = header.length;
    if u64::from(length) != header.fields_length() {
        return Err(Damage::LengthDisagrees(length));
    }
    let end = pos + length as usize;
    if end > limit {
        return Err(Damage::LengthPastEnd(length));
    }
    let trailing = trailing_length(data, end);
    if trailing != length {
        return Err(Damage::TrailingLength {
            trailing,
            leading: length,
        });
    }
    let crc = stored_crc(data, end);
    if crate::crc::crc32c(&data[pos..end - CRC_FROM_END]) != crc {
        return Err(Damage::CrcMismatch);
    }
    if header.commit_offset != commit_offset {
        return Err(Damage::WrongOffset(header.commit_offset));
    }
    Ok(header)
}

/// The header of the record at `pos` when it passes every rule of `check` but the CRC
/// (which the caller checks, several records at a time: `crc::crc32c_lanes`), and the
/// bytes its CRC covers are `data[pos..pos + length - CRC_FROM_END]`.
pub fn check_but_crc(data: &[u8], pos: usize, commit_offset: u64) -> Option<Header> {
    if pos
        .checked_add(HEADER_SIZE)
        .is_none_or(|end| end > data.len())
    {
        return None;
    }
    let header = Header::parse(&data[pos..]);
    let end = pos + header.length as usize;
    let intact = header.magic == RECORD_MAGIC
        && u64::from(header.length) == header.fields_length()
        && end <= data.len()
        && trailing_length(data, end) == header.length
        && header.commit_offset == commit_offset;
    intact.then_some(header)
}

/// Whether a record frame starts at `pos`: magic, and lengths that agree at both ends
/// (`record.frame_intact`). A damaged record keeps its frame; the magic inside another
/// record's body almost never has one.
pub fn frame_intact(data: &[u8], pos: usize) -> bool {
    let limit = data.len();
    if pos.checked_add(HEADER_SIZE).is_none_or(|end| end > limit) {
        return false;
    }
    let header = Header::parse(&data[pos..]);
    if header.magic != RECORD_MAGIC || u64::from(header.length) != header.fields_length() {
        return false;
    }
    let end = pos + header.length as usize;
    end <= limit && trailing_length(data, end) == header.length
}

/// The magic of the record (or end marker) starting at `pos`.
pub fn magic_at(data: &[u8], pos: usize) -> u32 {
    u32_at(data, pos + AT_MAGIC)
}

/// The length a record ending at `end` repeats in its last four bytes.
pub fn trailing_length(data: &[u8], end: usize) -> u32 {
    u32_at(data, end - LENGTH_FROM_END)
}

/// The CRC32C a record ending at `end` stores in its trailer.
pub fn stored_crc(data: &[u8], end: usize) -> u32 {
    u32_at(data, end - CRC_FROM_END)
}

/// The header of the record framed at `pos` (`frame_intact`) that says it lives at
/// `commit_offset`; its CRC is not checked: what a reader looks at before it knows it
/// wants the record.
pub fn framed_at(data: &[u8], pos: usize, commit_offset: u64) -> Option<Header> {
    if !frame_intact(data, pos) {
        return None;
    }
    let header = Header::parse(&data[pos..]);
    (header.commit_offset == commit_offset).then_some(header)
}

/// A record's parts between its header and its trailer, as slices of one record.
#[derive(Clone, Copy, Debug)]
pub struct Parts<'a> {
    pub topic: &'a [u8],
    pub tag: &'a [u8],
    pub keys: &'a [u8],
    pub properties: &'a [u8],
    pub body: &'a [u8],
}

impl<'a> Parts<'a> {
    /// The parts of the intact record `record` (exactly its bytes) with `header`.
    #[inline]
    pub fn of(record: &'a [u8], header: &Header) -> Parts<'a> {
        let mut at = HEADER_SIZE;
        let mut take = |n: usize| {
            let part = &record[at..at + n];
            at += n;
            part
        };
        Parts {
            topic: take(usize::from(header.topic_len)),
            tag: take(usize::from(header.tag_len)),
            keys: take(usize::from(header.keys_len)),
            properties: take(usize::from(header.props_len)),
            body: take(header.body_len as usize),
        }
    }
}

/// What a record holds besides the commit-log offset and the body's bytes.
#[derive(Clone, Copy, Debug)]
pub struct Fields<'a> {
    pub commit_offset: u64,
    pub queue_offset: u64,
    pub born_ms: i64,
    pub store_ms: i64,
    pub queue_id: u32,
    pub topic: &'a [u8],
    pub tag: &'a [u8],
    pub keys: &'a [u8],
    pub properties: &'a [u8],
}

/// The length of a record with these fields and a body of `body_len` bytes.
pub fn record_length(fields: &Fields<'_>, body_len: usize) -> usize {
    RECORD_OVERHEAD
        + fields.topic.len()
        + fields.tag.len()
        + fields.keys.len()
        + fields.properties.len()
        + body_len
}

/// Append the record (`encode_head` + body + `encode_trailer` of record.py) to `out`;
/// returns its length. The caller has checked every field's size against the format.
pub fn encode_into(out: &mut Vec<u8>, fields: &Fields<'_>, body: &[u8]) -> usize {
    let length = record_length(fields, body.len());
    let start = out.len();
    out.resize(start + length, 0);
    encode_at(&mut out[start..], fields, body)
}

/// Write the record at the start of `out` (at least its length); returns its length.
pub fn encode_at(out: &mut [u8], fields: &Fields<'_>, body: &[u8]) -> usize {
    let length = record_length(fields, body.len());
    let record = &mut out[..length];
    Header {
        length: length as u32,
        magic: RECORD_MAGIC,
        commit_offset: fields.commit_offset,
        queue_offset: fields.queue_offset,
        born_ms: fields.born_ms,
        store_ms: fields.store_ms,
        queue_id: fields.queue_id,
        body_len: body.len() as u32,
        flags: 0,
        topic_len: fields.topic.len() as u8,
        tag_len: fields.tag.len() as u8,
        keys_len: fields.keys.len() as u16,
        props_len: fields.properties.len() as u16,
    }
    .write(record);
    let mut at = HEADER_SIZE;
    for part in [
        fields.topic,
        fields.tag,
        fields.keys,
        fields.properties,
        body,
    ] {
        record[at..at + part.len()].copy_from_slice(part);
        at += part.len();
    }
    // The fold for 256 bytes and more, as `check` and the recovery scan (crc.rs).
    let crc = crate::crc::crc32c(&record[..at]);
    let end = at + TRAILER_SIZE;
    record[end - CRC_FROM_END..end - LENGTH_FROM_END].copy_from_slice(&crc.to_le_bytes());
    record[end - LENGTH_FROM_END..end].copy_from_slice(&(length as u32).to_le_bytes());
    length
}

/// A record's place: what `encode_at` writes at bytes `PLACE_AT..PLACE_AT + 36` of its
/// header (commit offset, queue offset, born and store times, queue id), known only
/// under the pen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    pub commit_offset: u64,
    pub queue_offset: u64,
    pub born_ms: i64,
    pub store_ms: i64,
    pub queue_id: u32,
}

/// Where a record's place begins in its header, and its bytes.
pub const PLACE_AT: usize = AT_COMMIT_OFFSET;
pub const PLACE_SIZE: usize = AT_QUEUE_ID + 4 - AT_COMMIT_OFFSET;

/// How far a change of the place carries to the record's CRC: over the checked bytes
/// after the place (`set_place`), for a record of `length` bytes.
pub fn place_shift(length: usize) -> crate::crc::ZeroShift {
    crate::crc::zero_shift(length - TRAILER_SIZE - PLACE_AT - PLACE_SIZE)
}

/// Set the place of a record `encode_at` wrote with its place zero (`record` is the
/// record's bytes), and carry the change into its CRC (`shift`: `place_shift` of its
/// length): the bytes are then those `encode_at` writes with the place set.
#[inline]
pub fn set_place(record: &mut [u8], place: &Place, shift: crate::crc::ZeroShift) {
    let mut bytes = [0u8; PLACE_SIZE];
    bytes[0..8].copy_from_slice(&place.commit_offset.to_le_bytes());
    bytes[8..16].copy_from_slice(&place.queue_offset.to_le_bytes());
    bytes[16..24].copy_from_slice(&place.born_ms.to_le_bytes());
    bytes[24..32].copy_from_slice(&place.store_ms.to_le_bytes());
    bytes[32..36].copy_from_slice(&place.queue_id.to_le_bytes());
    record[PLACE_AT..PLACE_AT + PLACE_SIZE].copy_from_slice(&bytes);
    let end = record.len();
    let at = end - CRC_FROM_END;
    let crc = u32_at(record, at) ^ crate::crc::change_of(&bytes, shift);
    record[at..at + 4].copy_from_slice(&crc.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `same_bytes` is `==` at every length up to 40, for slices that differ in any one
    /// byte (each bit of it), in length, or not at all, at offsets 0–7 of a buffer.
    #[test]
    fn same_bytes_is_equality() {
        let buffer: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(37) ^ 0x5a).collect();
        for at in 0..8 {
            for n in 0..=40 {
                let a = &buffer[at..at + n];
                let copy = a.to_vec();
                assert!(same_bytes(a, &copy), "{n} at {at}");
                for i in 0..n {
                    for bit in 0..8 {
                        let mut other = copy.clone();
                        other[i] ^= 1 << bit;
                        assert!(!same_bytes(a, &other), "{n} at {at}, byte {i} bit {bit}");
                        assert!(!same_bytes(&other, a), "{n} at {at}, byte {i} bit {bit}");
                    }
                }
                if n > 0 {
                    assert!(!same_bytes(a, &copy[..n - 1]), "{n} at {at}");
                    assert!(!same_bytes(&copy[1..], a), "{n} at {at}");
                }
            }
        }
    }

    fn worked_example() -> Vec<u8> {
        // docs/FORMAT.md, "Worked example": append("t", b"hi", key="k", tag="x").
        let mut out = Vec::new();
        let fields = Fields {
            commit_offset: 0,
            queue_offset: 0,
            born_ms: 1795314808832,
            store_ms: 1795314808832,
            queue_id: 1,
            topic: b"t",
            tag: b"x",
            keys: b"k",
            properties: b"",
        };
        encode_into(&mut out, &fields, b"hi");
        out
    }

    #[test]
    fn field_positions_follow_one_another_to_the_header_size() {
        let fields = [
            (AT_LENGTH, 4),
            (AT_MAGIC, 4),
            (AT_COMMIT_OFFSET, 8),
            (AT_QUEUE_OFFSET, 8),
            (AT_BORN_MS, 8),
            (AT_STORE_MS, 8),
            (AT_QUEUE_ID, 4),
            (AT_BODY_LEN, 4),
            (AT_FLAGS, 2),
            (AT_TOPIC_LEN, 1),
            (AT_TAG_LEN, 1),
            (AT_KEYS_LEN, 2),
            (AT_PROPS_LEN, 2),
        ];
        let mut at = 0;
        for (pos, size) in fields {
            assert_eq!(pos, at);
            at += size;
        }
        assert_eq!(at, HEADER_SIZE);
        assert_eq!(MARKER_SIZE, AT_MAGIC + 4);
        assert_eq!(CRC_FROM_END, LENGTH_FROM_END + 4);
        assert_eq!(TRAILER_SIZE, CRC_FROM_END);
    }

    #[test]
    fn the_exported_header_fields_follow_one_another_to_the_header_size() {
        let mut at = 0;
        for (name, pos, size) in HEADER_FIELDS {
            assert_eq!(pos, at, "{name}");
            at += size;
        }
        assert_eq!(at, HEADER_SIZE);
    }

    #[test]
    fn the_worked_example_encodes_byte_for_byte() {
        let expected: Vec<u8> = [
            "45000000 54444d52 0000000000000000 0000000000000000",
            "00f81901a2010000 00f81901a2010000 01000000 02000000",
            "0000 01 01 0100 0000 74 78 6b 6869 5a8ebdd2 45000000",
        ]
        .concat()
        .split_whitespace()
        .collect::<String>()
        .as_bytes()
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
        .collect();
        assert_eq!(worked_example(), expected);
    }

    #[test]
    fn crc32c_is_castagnoli() {
        assert_eq!(crc32c::crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn an_intact_record_checks_and_splits_into_its_parts() {
        let data = worked_example();
        let header = check(&data, 0, 0).unwrap();
        let parts = Parts::of(&data, &header);
        assert_eq!(
            (parts.topic, parts.tag, parts.keys, parts.body),
            (&b"t"[..], &b"x"[..], &b"k"[..], &b"hi"[..])
        );
        assert!(frame_intact(&data, 0));
    }

    #[test]
    fn a_framed_record_is_seen_before_its_crc_is_checked() {
        let data = worked_example();
        assert!(framed_at(&data, 0, 0).is_some());
        assert!(
            framed_at(&data, 0, 7).is_none(),
            "it says it lives elsewhere"
        );
        let mut body = data.clone();
        body[61] ^= 1; // in the body: the frame holds, the CRC does not
        assert!(framed_at(&body, 0, 0).is_some());
        assert_eq!(check(&body, 0, 0).unwrap_err(), Damage::CrcMismatch);
        let mut length = data.clone();
        length[0] = 70;
        assert!(framed_at(&length, 0, 0).is_none());
        assert!(framed_at(&data[..60], 0, 0).is_none());
    }

    #[test]
    fn each_damage_is_named_as_the_python_reference_names_it() {
        let data = worked_example();
        assert_eq!(
            check(&data[..40], 0, 0).unwrap_err().to_string(),
            "header runs past the end of the data"
        );
        let mut bad = data.clone();
        bad[4] = b'X';
        assert_eq!(
            check(&bad, 0, 0).unwrap_err().to_string(),
            "bad magic 0x524d4458"
        );
        let mut bad = data.clone();
        bad[0] = 70;
        assert_eq!(
            check(&bad, 0, 0).unwrap_err().to_string(),
            "length field 70 disagrees with fields"
        );
        assert_eq!(
            check(&data[..68], 0, 0).unwrap_err().to_string(),
            "length 69 runs past the end of the data"
        );
        let mut bad = data.clone();
        bad[66] = 1;
        assert_eq!(
            check(&bad, 0, 0).unwrap_err().to_string(),
            "trailing length 325 differs from leading 69"
        );
        let mut bad = data.clone();
        bad[60] ^= 1;
        assert_eq!(
            check(&bad, 0, 0).unwrap_err().to_string(),
            "CRC32C mismatch"
        );
        assert_eq!(
            check(&data, 0, 5).unwrap_err().to_string(),
            "record says it lives at commit-log offset 0"
        );
    }

    /// The encoder's CRC (folded from 256 bytes where the CPU folds) is the crate's
    /// CRC32C of the record's covered bytes at every body length around the fold's
    /// steps, in an output buffer at every alignment of a 64-byte line.
    #[test]
    fn the_encoders_crc_is_the_crates_at_every_length_and_alignment() {
        let body: Vec<u8> = (0..4200u32).map(|i| (i * 131 + 7) as u8).collect();
        let fields = Fields {
            commit_offset: 4096,
            queue_offset: 9,
            born_ms: 1795314808832,
            store_ms: 1795314808833,
            queue_id: 3,
            topic: b"orders",
            tag: b"tag",
            keys: b"key",
            properties: b"a\x01b\x02",
        };
        let lengths = (0..700).chain(950..1100).chain(4000..4200);
        let mut out = vec![0u8; 4500 + 64];
        for length in lengths {
            for shift in 0..64 {
                let size = encode_at(&mut out[shift..], &fields, &body[..length]);
                let record = &out[shift..shift + size];
                let covered = &record[..size - CRC_FROM_END];
                assert_eq!(
                    stored_crc(record, size),
                    crc32c::crc32c(covered),
                    "body {length}, at {shift}"
                );
                assert!(check(record, 0, 4096).is_ok());
            }
        }
    }
}
