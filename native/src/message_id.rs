//! Message ids (`storeadapter/engine/message_id.py`): the store's 8 hex digits, then the
//! record's commit offset in 16 upper-case hex digits, as the store writes them.

/// The offset written in `digits` (16 upper-case hex digits, the first the most
/// significant); None when any byte is not one of `0-9A-F`.
///
/// Eight digits at a time in a word (SWAR): each byte's range checked and its value
/// taken with a few operations over all eight, then the nibbles gathered. A `get` parses
/// one id per call: the digit-by-digit loop cost ~100 instructions of it.
#[inline]
pub fn offset_digits(digits: &[u8; 16]) -> Option<u64> {
    let (high, low) = digits.split_at(8);
    let high = eight(u64::from_le_bytes(high.try_into().ok()?))?;
    let low = eight(u64::from_le_bytes(low.try_into().ok()?))?;
    Some(u64::from(high) << 32 | u64::from(low))
}

/// `offset`'s 16 upper-case hex digits, most significant first (a message id's last
/// 16 characters): each half's nibbles spread one a byte, then turned into digits a word
/// at a time (no table, no loop; a result's id is made for every message appended).
#[inline]
pub fn hex_digits(offset: u64) -> [u8; 16] {
    let mut digits = [0u8; 16];
    digits[..8].copy_from_slice(&eight_digits((offset >> 32) as u32));
    digits[8..].copy_from_slice(&eight_digits(offset as u32));
    digits
}

/// `half`'s 8 upper-case hex digits, most significant first.
#[inline]
fn eight_digits(half: u32) -> [u8; 8] {
    // Byte k (little-endian) the half's k-th byte from the top, then each byte spread
    // over two: byte 2k its upper nibble, byte 2k + 1 its lower one.
    let mut w = u64::from(u32::from_le_bytes(half.to_be_bytes()));
    w = (w | (w << 16)) & 0x0000_FFFF_0000_FFFF;
    w = (w | (w << 8)) & 0x00FF_00FF_00FF_00FF;
    let nibbles = ((w >> 4) & 0x000F_000F_000F_000F) | ((w & 0x000F_000F_000F_000F) << 8);
    // '0' + d, and 7 more for d of 10 or more ('A'..'F'): d + 6 carries into bit 4 then.
    let letters = ((nibbles + ONES * 6) >> 4) & ONES;
    (nibbles + ONES * u64::from(b'0') + letters * 7).to_le_bytes()
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH_BITS: u64 = 0x8080_8080_8080_8080;

/// Each byte of `word` (all below 0x80) at least `low`: its high bit set where it is.
#[inline]
fn at_least(word: u64, low: u8) -> u64 {
    word.wrapping_add(ONES * u64::from(0x80 - low)) & HIGH_BITS
}

/// Each byte of `word` (all below 0x80) at most `high`: its high bit set where it is.
#[inline]
fn at_most(word: u64, high: u8) -> u64 {
    !word.wrapping_add(ONES * u64::from(0x7F - high)) & HIGH_BITS
}

/// The 8 hex digits of `word` (the first in its lowest byte) as a number.
#[inline]
fn eight(word: u64) -> Option<u32> {
    if word & HIGH_BITS != 0 {
        return None;
    }
    // Below 0x80 each, so adding at most 0x50 to a byte carries into no other byte.
    let digit = at_least(word, b'0') & at_most(word, b'9');
    let letter = at_least(word, b'A') & at_most(word, b'F');
    if digit | letter != HIGH_BITS {
        return None;
    }
    // '0'-'9' are 0x30-0x39, 'A'-'F' 0x41-0x46: the low nibble, plus 9 for a letter.
    let nibbles = (word & (ONES * 0x0F)) + (letter >> 7) * 9;
    // The first digit (lowest byte) is the most significant: swap, then pair them up.
    let mut value = nibbles.swap_bytes();
    value = (value | value >> 4) & 0x00FF_00FF_00FF_00FF;
    value = (value | value >> 8) & 0x0000_FFFF_0000_FFFF;
    value = (value | value >> 16) & 0xFFFF_FFFF;
    Some(value as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn reference(digits: &[u8; 16]) -> Option<u64> {
        digits.iter().try_fold(0u64, |value, &b| {
            let digit = match b {
                b'0'..=b'9' => b - b'0',
                b'A'..=b'F' => b - b'A' + 10,
                _ => return None,
            };
            Some(value << 4 | u64::from(digit))
        })
    }

    #[test]
    fn written_offsets_read_back() {
        for offset in [
            0,
            1,
            0xF,
            0x10,
            0xABCD_EF01_2345_6789,
            u64::MAX,
            1 << 63,
            4096,
        ] {
            let text = format!("{offset:016X}");
            let digits: [u8; 16] = text.as_bytes().try_into().unwrap();
            assert_eq!(offset_digits(&digits), Some(offset), "{text}");
        }
    }

    #[test]
    fn every_byte_next_to_the_digits_is_refused() {
        let mut digits = *b"0123456789ABCDEF";
        for at in 0..16 {
            for byte in 0..=255u8 {
                let kept = digits[at];
                digits[at] = byte;
                assert_eq!(
                    offset_digits(&digits),
                    reference(&digits),
                    "{byte:#x} at {at}"
                );
                digits[at] = kept;
            }
        }
    }

    #[test]
    fn hex_digits_are_format_s() {
        for offset in [
            0,
            1,
            9,
            10,
            0xF,
            0x10,
            0xABCDEF,
            1 << 63,
            u64::MAX,
            0x0123_4567_89AB_CDEF,
        ] {
            assert_eq!(hex_digits(offset), format!("{offset:016X}").as_bytes());
        }
    }

    proptest! {
        #[test]
        fn hex_digits_read_back(offset in any::<u64>()) {
            let text = format!("{offset:016X}");
            prop_assert_eq!(&hex_digits(offset)[..], text.as_bytes());
            prop_assert_eq!(offset_digits(&hex_digits(offset)), Some(offset));
        }

        #[test]
        fn same_as_digit_by_digit(digits in proptest::array::uniform16(
            prop_oneof![
                4 => proptest::sample::select(b"0123456789ABCDEF".to_vec()),
                1 => any::<u8>(),
            ]
        )) {
            prop_assert_eq!(offset_digits(&digits), reference(&digits));
        }
    }
}
