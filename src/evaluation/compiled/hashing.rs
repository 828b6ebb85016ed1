//! The client specification's hashing: MurmurHash3 (x86, 32 bits) of `"groupId:value"`,
//! normalised to `1..=modulus`, computed over a stack buffer rather than a formatted string.

/// The seed of a rollout's hash (`normalized_hash(group, id, 100, 0)`).
pub const ROLLOUT_SEED: u32 = 0;
/// The seed of a variant's hash (the specification's `86028157`).
pub const VARIANT_SEED: u32 = 86_028_157;

/// Longest `"group:value"` hashed on the stack; a longer one is joined on the heap.
const STACK_BYTES: usize = 192;

/// MurmurHash3 x86_32 of `bytes` with `seed`.
pub fn murmur3_32(bytes: &[u8], seed: u32) -> u32 {
    const C1: u32 = 0xcc9e_2d51;
    const C2: u32 = 0x1b87_3593;
    let mut hash = seed;
    let mut blocks = bytes.chunks_exact(4);
    for block in &mut blocks {
        let mut k = u32::from_le_bytes([block[0], block[1], block[2], block[3]]);
        k = k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
        hash ^= k;
        hash = hash
            .rotate_left(13)
            .wrapping_mul(5)
            .wrapping_add(0xe654_6b64);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        let mut k = 0u32;
        for (i, byte) in tail.iter().enumerate() {
            k |= u32::from(*byte) << (8 * i);
        }
        k = k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
        hash ^= k;
    }
    // The length is mixed in modulo 2^32, as the reference implementation does.
    hash ^= bytes.len() as u32;
    hash ^= hash >> 16;
    hash = hash.wrapping_mul(0x85eb_ca6b);
    hash ^= hash >> 13;
    hash = hash.wrapping_mul(0xc2b2_ae35);
    hash ^ (hash >> 16)
}

/// `murmur3_32("{group}:{value}", seed) % modulus + 1` (`modulus` must not be 0).
pub fn normalized_hash(group: &str, value: &str, modulus: u32, seed: u32) -> u32 {
    let length = group.len() + 1 + value.len();
    let hash = if length <= STACK_BYTES {
        let mut buffer = [0u8; STACK_BYTES];
        buffer[..group.len()].copy_from_slice(group.as_bytes());
        buffer[group.len()] = b':';
        buffer[group.len() + 1..length].copy_from_slice(value.as_bytes());
        murmur3_32(&buffer[..length], seed)
    } else {
        let mut joined = Vec::with_capacity(length);
        joined.extend_from_slice(group.as_bytes());
        joined.push(b':');
        joined.extend_from_slice(value.as_bytes());
        murmur3_32(&joined, seed)
    };
    hash % modulus + 1
}

/// `normalized_hash` of a number's decimal text (a random stickiness value), without
/// formatting it on the heap.
pub fn normalized_hash_of_number(group: &str, value: u32, modulus: u32, seed: u32) -> u32 {
    let mut digits = [0u8; 10];
    let mut start = digits.len();
    let mut rest = value;
    loop {
        start -= 1;
        digits[start] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    // ASCII digits are always text.
    let text = std::str::from_utf8(&digits[start..]).unwrap_or("0");
    normalized_hash(group, text, modulus, seed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur3_matches_the_reference_vectors() {
        // Published test vectors of MurmurHash3_x86_32.
        assert_eq!(murmur3_32(b"", 0), 0);
        assert_eq!(murmur3_32(b"", 1), 0x514e_28b7);
        assert_eq!(murmur3_32(b"", 0xffff_ffff), 0x81f1_6f39);
        assert_eq!(murmur3_32(&[0, 0, 0, 0], 0), 0x2362_f9de);
        assert_eq!(murmur3_32(b"aaaa", 0x9747_b28c), 0x5a97_808a);
        assert_eq!(murmur3_32(b"aaa", 0x9747_b28c), 0x283e_0130);
        assert_eq!(murmur3_32(b"aa", 0x9747_b28c), 0x5d21_1726);
        assert_eq!(murmur3_32(b"a", 0x9747_b28c), 0x7fa0_9ea6);
        assert_eq!(murmur3_32(b"Hello, world!", 0x9747_b28c), 0x2488_4cba);
        assert_eq!(
            murmur3_32(b"The quick brown fox jumps over the lazy dog", 0x9747_b28c),
            0x2fa8_26cd
        );
    }

    #[test]
    fn normalized_hashes_match_the_client_specification() {
        // Values the client specification's gradual rollout and variant tests rely on, checked
        // against unleash-yggdrasil's `normalized_hash` (the SDKs' engine).
        for (group, id, modulus, seed) in [
            ("Demo", "123", 100, ROLLOUT_SEED),
            ("groupA", "user-1", 100, ROLLOUT_SEED),
            ("feature.variants", "some-user", 1000, VARIANT_SEED),
            ("", "", 100, ROLLOUT_SEED),
            ("ü-group", "ß", 7, VARIANT_SEED),
        ] {
            let expected =
                unleash_yggdrasil::strategy_parsing::normalized_hash(group, id, modulus, seed)
                    .expect("hashes");
            assert_eq!(
                normalized_hash(group, id, modulus, seed),
                expected,
                "{group}:{id}"
            );
        }
        // A known value, independent of any engine: a rollout bucket.
        assert_eq!(normalized_hash("Demo", "123", 100, ROLLOUT_SEED), 13);
        // And a variant's (murmur3 of "feature.variants:some-user" with seed 86028157, worked
        // out by an independent implementation): a wrong VARIANT_SEED fails here.
        assert_eq!(
            normalized_hash("feature.variants", "some-user", 1000, VARIANT_SEED),
            391
        );
    }

    #[test]
    fn long_inputs_and_numbers_hash_as_their_text() {
        let long = "x".repeat(STACK_BYTES * 2);
        let expected = unleash_yggdrasil::strategy_parsing::normalized_hash("g", &long, 100, 0)
            .expect("hashes");
        assert_eq!(normalized_hash("g", &long, 100, 0), expected);
        for number in [0, 1, 9, 10, 9999, u32::MAX] {
            assert_eq!(
                normalized_hash_of_number("g", number, 100, 0),
                normalized_hash("g", &number.to_string(), 100, 0)
            );
        }
    }
}
