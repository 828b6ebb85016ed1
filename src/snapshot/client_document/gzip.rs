//! The gzip body of a client document, made of stretches compressed independently: each
//! stretch is raw deflate blocks ending in a sync flush (byte aligned, not final), so the
//! stretches joined in order behind one gzip header, closed by a final block and the combined
//! CRC-32, form one ordinary gzip stream that every client accepts.
//!
//! A stretch is either compressed or, when a writer waits for the build (`Effort::Quick`),
//! stored: stored blocks around the stretch's own plain bytes, shared with the plain body
//! rather than copied.

use std::cell::RefCell;

use bytes::Bytes;
use flate2::{Compress, Compression, FlushCompress, Status};

use super::body::DocumentBody;
use super::piece::SCRATCH_KEPT_MAX;

/// gzip member header: deflate, no name, no mtime, unknown OS (RFC 1952).
const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
/// The most bytes one stored block holds (its length is 16 bits).
const STORED_BLOCK_MAX: usize = u16::MAX as usize;
/// A stored block's header: the block type byte, the length and its complement.
const STORED_HEADER: usize = 5;

/// The compression level of every stretch. The gzip body's size bounds how many responses a
/// second a host sends: at 10,000 toggles (the bench kit's document) level 7 makes it 1.00
/// times the ceiling's whole-document gzip at level 6 and level 6 1.02 times; level 7 builds
/// take about 6 % longer than level 6 ones, level 8 another fifth.
const LEVEL: u32 = 7;

thread_local! {
    /// One compressor per thread, reset between stretches, and the buffer it writes into:
    /// its tables take hundreds of KiB, and allocating them per group left the heap
    /// fragmented (resident memory grew by a third at 10,000 toggles).
    static COMPRESSOR: RefCell<Option<(Compress, Vec<u8>)>> = const { RefCell::new(None) };
}

/// `plain` as deflate stored blocks (byte aligned, like every stretch's start).
pub(super) fn stored_blocks(plain: &[u8], last: bool) -> Vec<u8> {
    let headers = stored_headers(plain.len(), last);
    let mut blocks = Vec::with_capacity(headers.len() + plain.len());
    let mut chunks = plain.chunks(STORED_BLOCK_MAX);
    for header in headers.chunks(STORED_HEADER) {
        blocks.extend_from_slice(header);
        blocks.extend_from_slice(chunks.next().unwrap_or_default());
    }
    blocks
}

/// The headers of the stored blocks that hold `len` bytes, one per block.
fn stored_headers(len: usize, last: bool) -> Vec<u8> {
    let count = len.div_ceil(STORED_BLOCK_MAX).max(usize::from(last));
    let mut headers = Vec::with_capacity(count * STORED_HEADER);
    for i in 0..count {
        let block = (len - i * STORED_BLOCK_MAX).min(STORED_BLOCK_MAX) as u16;
        headers.push(u8::from(last && i + 1 == count));
        headers.extend_from_slice(&block.to_le_bytes());
        headers.extend_from_slice(&(!block).to_le_bytes());
    }
    headers
}

/// How a stretch's bytes go into the gzip body.
#[derive(Debug)]
enum Blocks {
    /// Deflate blocks ending in a sync flush (or, for the last stretch, a final block).
    Compressed(Bytes),
    /// Stored blocks: these headers, each followed by its part of the plain bytes.
    Stored(Bytes),
}

/// One stretch of the gzip body, with what the trailer needs.
#[derive(Debug)]
pub(super) struct Deflated {
    blocks: Blocks,
    crc: u32,
    len: u64,
    /// `crc_shift(len)`, made once: joining the stretches' checksums per build then costs a
    /// multiplication each (computing it per build was a fifth of a quick build's time).
    shift: u32,
}

impl Deflated {
    /// `plain` as stored (uncompressed) blocks, byte aligned like a sync flush's end.
    pub(super) fn stored(plain: &[u8]) -> Self {
        Self::new(
            Blocks::Stored(Bytes::from(stored_headers(plain.len(), false))),
            plain,
        )
    }

    /// Whether the stretch is stored rather than compressed.
    pub(super) fn is_stored(&self) -> bool {
        matches!(self.blocks, Blocks::Stored(_))
    }

    /// `plain` as deflate blocks ending in a sync flush (`last`: in a final block), able to
    /// refer back into `before`, the document bytes that precede it.
    pub(super) fn of(plain: &[u8], before: &[u8], last: bool) -> Self {
        let fresh = || Compress::new(Compression::new(LEVEL), false);
        COMPRESSOR.with(|cell| match cell.try_borrow_mut() {
            Ok(mut slot) => {
                let (compress, blocks) = slot.get_or_insert_with(|| (fresh(), Vec::new()));
                compress.reset();
                blocks.clear();
                let deflated = Self::with(compress, blocks, plain, before, last);
                if blocks.capacity() > SCRATCH_KEPT_MAX {
                    *blocks = Vec::new();
                }
                deflated
            }
            Err(_) => Self::with(&mut fresh(), &mut Vec::new(), plain, before, last),
        })
    }

    /// Compresses into `blocks` (empty) and keeps an exact-size copy.
    fn with(
        compress: &mut Compress,
        blocks: &mut Vec<u8>,
        plain: &[u8],
        before: &[u8],
        last: bool,
    ) -> Self {
        // A dictionary only improves compression; without it the output is still correct.
        if !before.is_empty() && compress.set_dictionary(before).is_err() {
            compress.reset();
        }
        let flush = if last {
            FlushCompress::Finish
        } else {
            FlushCompress::Sync
        };
        blocks.reserve(plain.len() / 4 + 64);
        let start = compress.total_in();
        loop {
            let consumed = (compress.total_in() - start) as usize;
            if blocks.capacity() - blocks.len() < 64 {
                blocks.reserve(blocks.capacity().max(1024));
            }
            // Compressing from memory into memory has no failure mode but a bug; should one
            // show, the stretch goes out as stored (uncompressed) blocks, still valid.
            let status = match compress.compress_vec(&plain[consumed..], blocks, flush) {
                Ok(status) => status,
                Err(e) => {
                    tracing::error!(error = %e, "deflate failed; storing the stretch uncompressed");
                    *blocks = stored_blocks(plain, last);
                    break;
                }
            };
            let drained = (compress.total_in() - start) as usize == plain.len()
                && blocks.len() < blocks.capacity();
            if status == Status::StreamEnd || (!last && drained) {
                break;
            }
        }
        Self::new(Blocks::Compressed(Bytes::copy_from_slice(blocks)), plain)
    }

    fn new(blocks: Blocks, plain: &[u8]) -> Self {
        Self {
            blocks,
            crc: crc32fast::hash(plain),
            len: plain.len() as u64,
            shift: crc_shift(plain.len() as u64),
        }
    }

    /// Appends the stretch's bytes to `parts`; `plain` is the stretch uncompressed (what
    /// stored blocks hold).
    fn push_parts(&self, plain: &Bytes, parts: &mut Vec<Bytes>) {
        match &self.blocks {
            Blocks::Compressed(blocks) => parts.push(blocks.clone()),
            Blocks::Stored(headers) => {
                for (i, start) in (0..plain.len()).step_by(STORED_BLOCK_MAX).enumerate() {
                    let header = i * STORED_HEADER;
                    parts.push(headers.slice(header..header + STORED_HEADER));
                    parts.push(plain.slice(start..(start + STORED_BLOCK_MAX).min(plain.len())));
                }
            }
        }
    }
}

/// One gzip stream of `stretches` (each with its plain bytes; the last one ends in a final
/// block): header, every stretch's blocks, then the CRC-32 of the whole (combined from the
/// stretches') and the length. Joined into one buffer when no stretch is stored (it is then
/// small and sent often); otherwise sent as the parts, so that a quick build copies nothing.
pub(super) fn gzip_body<'a>(
    stretches: impl Iterator<Item = (&'a Deflated, &'a Bytes)>,
) -> DocumentBody {
    let mut parts = Vec::with_capacity(stretches.size_hint().0 + 2);
    parts.push(Bytes::from_static(&GZIP_HEADER));
    let mut crc = crc32fast::hash(b"");
    let mut len = 0u64;
    let mut stored = false;
    for (stretch, plain) in stretches {
        stretch.push_parts(plain, &mut parts);
        stored |= stretch.is_stored();
        crc = crc_join(crc, stretch.crc, stretch.shift);
        len += stretch.len;
    }
    let mut trailer = Vec::with_capacity(8);
    trailer.extend_from_slice(&crc.to_le_bytes());
    // RFC 1952: ISIZE is the length modulo 2^32.
    trailer.extend_from_slice(&(len as u32).to_le_bytes());
    parts.push(Bytes::from(trailer));
    match stored {
        true => DocumentBody::parts(parts),
        false => DocumentBody::joined(parts),
    }
}

/// The CRC-32 polynomial, reflected.
const CRC_POLYNOMIAL: u32 = 0xedb8_8320;

/// `a(x)·b(x)` modulo the CRC-32 polynomial, in the reflected bit order CRC-32 uses.
fn crc_multiply(a: u32, mut b: u32) -> u32 {
    let mut product = 0;
    for i in 0..32 {
        product ^= b & ((a >> (31 - i)) & 1).wrapping_neg();
        b = (b >> 1) ^ ((b & 1).wrapping_neg() & CRC_POLYNOMIAL);
    }
    product
}

/// `x^(8·len)` modulo the polynomial: multiplying a CRC-32 by it appends `len` zero bytes.
fn crc_shift(len: u64) -> u32 {
    let (mut shift, mut square, mut n) = (1 << 31, 1 << 23, len);
    while n != 0 {
        if n & 1 == 1 {
            shift = crc_multiply(square, shift);
        }
        square = crc_multiply(square, square);
        n >>= 1;
    }
    shift
}

/// The CRC-32 of `a` followed by `b`, from their CRC-32s and `crc_shift` of `b`'s length
/// (as zlib's `crc32_combine_op`).
fn crc_join(crc_a: u32, crc_b: u32, shift_b: u32) -> u32 {
    crc_multiply(shift_b, crc_a) ^ crc_b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joined_checksums_are_the_checksum_of_the_joined_bytes() {
        let data: Vec<u8> = (0..200_000u32).map(|i| (i * 31 % 251) as u8).collect();
        for (a, b) in [(0, 0), (0, 17), (1, 1), (1_000, 65_536), (70_000, 130_000)] {
            let (first, second) = (&data[..a], &data[a..a + b]);
            assert_eq!(
                crc_join(
                    crc32fast::hash(first),
                    crc32fast::hash(second),
                    crc_shift(b as u64)
                ),
                crc32fast::hash(&data[..a + b]),
                "{a} + {b} bytes"
            );
        }
    }
}
