//! Assembles a client document from pieces: the plain body as the groups' bytes in order,
//! the gzip body from each group's compressed stretch, and the ETag from digests.
//!
//! Each group is compressed once into raw deflate blocks ending in a sync flush (byte
//! aligned, not final), with up to 32 KiB of the document just before it (from at most two
//! groups) as preset dictionary, so it compresses almost as well as inside one stream. The
//! blocks of unchanged groups are reused by the next version of the same document: joined in
//! order behind one gzip header and closed by a final block and the combined CRC-32, they form
//! one ordinary gzip stream that every client accepts. A changed toggle recompresses its group
//! and the groups whose dictionary reaches into it (at most the next two).
//!
//! A build a writer waits for (`Effort::Quick`) stores those groups uncompressed instead:
//! compression is most of a build's time, and the writer is answered only once the document
//! serves its write. The next unhurried build (`Effort::Full`) compresses them; the ETag,
//! made of digests, is the same either way.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use axum::http::HeaderValue;
use base64::Engine;
use bytes::Bytes;
use flate2::{Compress, Compression, FlushCompress, Status};
use sha2::{Digest, Sha256};

use super::piece::{with_scratch, write_client_json, ClientPiece, PieceEntry, SCRATCH_KEPT_MAX};
use super::plain::PlainDocument;

/// spec §4.1: the client format is version 1; the toggles follow.
const PREFIX: &[u8] = br#"{"version":1,"features":["#;
const SEPARATOR: &[u8] = b",";
const SUFFIX: &[u8] = b"]}";
/// A group never grows past this many toggles, whatever the names (bounds the work a change
/// costs when names happen to cluster).
const MAX_GROUP: usize = 128;
/// gzip member header: deflate, no name, no mtime, unknown OS (RFC 1952).
const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];

/// How much of the document before a stretch its compressor is primed with: all that deflate
/// can refer back to. Priming with the previous group alone (groups average about 18 KiB at
/// 10,000 toggles) made the gzip body 3–4 % larger.
const DICTIONARY: usize = 32 * 1024;

/// How many groups back a stretch's dictionary may reach, so that a change recompresses at
/// most this many groups besides its own, however small the toggles. At 10,000 toggles (the
/// bench kit's document, groups of about 18 KiB) two groups fill the window nearly always: a
/// change recompresses 2.75 groups on average (3.4 without the bound, 2 with one group back)
/// for a gzip body 1.2 % larger than without the bound (4 % smaller than with one group).
const WINDOW_GROUPS: usize = 2;

/// The compression level of every stretch. The gzip body's size bounds how many responses a
/// second a host sends: at 10,000 toggles (the bench kit's document) level 7 makes it 1.00
/// times the ceiling's whole-document gzip at level 6 and level 6 1.02 times; level 7 builds
/// take about 6 % longer than level 6 ones, level 8 another fifth.
const LEVEL: u32 = 7;

/// How much a build compresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effort {
    /// Every group compressed at `LEVEL` (stored groups of earlier builds too).
    Full,
    /// Groups that must be made again are stored uncompressed, for a later full build.
    Quick,
}

/// `plain` as deflate stored blocks (byte aligned, like every stretch's start).
pub(super) fn stored_blocks(plain: &[u8], last: bool) -> Vec<u8> {
    let mut blocks = Vec::with_capacity(plain.len() + plain.len() / 65_535 * 5 + 5);
    let mut chunks = plain.chunks(usize::from(u16::MAX)).peekable();
    if chunks.peek().is_none() && last {
        blocks.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(chunk) = chunks.next() {
        let final_block = last && chunks.peek().is_none();
        let len = chunk.len() as u16;
        blocks.push(u8::from(final_block));
        blocks.extend_from_slice(&len.to_le_bytes());
        blocks.extend_from_slice(&(!len).to_le_bytes());
        blocks.extend_from_slice(chunk);
    }
    blocks
}

thread_local! {
    /// One compressor per thread, reset between stretches, and the buffer it writes into:
    /// its tables take hundreds of KiB, and allocating them per group left the heap
    /// fragmented (resident memory grew by a third at 10,000 toggles).
    static COMPRESSOR: RefCell<Option<(Compress, Vec<u8>)>> = const { RefCell::new(None) };
}

/// Compressed bytes of one stretch of the document, with what the gzip trailer needs.
#[derive(Debug)]
struct Deflated {
    blocks: Bytes,
    crc: u32,
    len: u64,
}

impl Deflated {
    /// `plain` as stored (uncompressed) blocks, byte aligned like a sync flush's end.
    fn stored(plain: &[u8]) -> Self {
        let mut crc = crc32fast::Hasher::new();
        crc.update(plain);
        Self {
            blocks: Bytes::from(stored_blocks(plain, false)),
            crc: crc.finalize(),
            len: plain.len() as u64,
        }
    }

    /// `plain` as deflate blocks ending in a sync flush (`last`: in a final block), able to
    /// refer back into `before`, the document bytes that precede it.
    fn of(plain: &[u8], before: &[u8], last: bool) -> Self {
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
        let mut crc = crc32fast::Hasher::new();
        crc.update(plain);
        Self {
            blocks: Bytes::copy_from_slice(blocks),
            crc: crc.finalize(),
            len: plain.len() as u64,
        }
    }
}

/// The fixed stretches: the prefix, and the suffix with the final block.
struct Frame {
    prefix: Deflated,
    suffix: Deflated,
}

fn frame() -> &'static Frame {
    static FRAME: OnceLock<Frame> = OnceLock::new();
    FRAME.get_or_init(|| Frame {
        prefix: Deflated::of(PREFIX, b"", false),
        suffix: Deflated::of(SUFFIX, b"", true),
    })
}

/// A run of consecutive toggles, joined and compressed together.
#[derive(Debug)]
pub struct Group {
    /// The pieces, to recognise the same run in the next build (pieces are shared between
    /// versions, so the same pointers are the same content).
    members: Vec<Arc<ClientPiece>>,
    /// SHA-256 over the pieces' digests: the group's content identity.
    digest: [u8; 32],
    /// What its blocks may refer back into: the window of the document before it.
    after: WindowId,
    /// The toggles' JSON joined by the separator (and led by one, after another group).
    plain: Bytes,
    /// Where each member's JSON lies in `plain` (start, end), so a later group holding the
    /// same toggle copies its bytes instead of serialising it again.
    spans: Box<[(u32, u32)]>,
    deflated: Deflated,
    /// Made by a quick build: `deflated` is stored blocks, for a full build to compress.
    stored: bool,
}

impl Group {
    fn is_run_of(&self, members: &[&PieceEntry], after: &Window<'_>) -> bool {
        after.is(&self.after)
            && self.members.len() == members.len()
            && self
                .members
                .iter()
                .zip(members)
                .all(|(a, b)| Arc::ptr_eq(a, &b.piece))
    }
}

/// A built client document: plain and gzip bytes and the ETag.
#[derive(Debug)]
pub struct ClientResponse {
    pub plain: PlainDocument,
    pub gzip: Bytes,
    /// Weak validator derived from the content alone: identical content gives the identical
    /// ETag on every replica (gzip and plain are one representation, hence weak).
    pub etag: HeaderValue,
    /// The configuration version the document was built from (0: not from one).
    pub version: u64,
    /// The groups, for the next build of the same document to reuse.
    groups: Vec<Arc<Group>>,
    /// Whether a group is stored uncompressed (a quick build's): a full build compresses it.
    pub uncompressed: bool,
}

impl ClientResponse {
    /// Whether an `If-None-Match` header value matches this response (weak comparison,
    /// comma-separated lists and `*` allowed).
    pub fn matches(&self, if_none_match: &[u8]) -> bool {
        let own = strip_weak(self.etag.as_bytes());
        if_none_match.split(|b| *b == b',').any(|candidate| {
            let candidate = candidate.trim_ascii();
            candidate == b"*" || strip_weak(candidate) == own
        })
    }

    /// How many of its groups are not `earlier`'s: those a build compressed.
    #[cfg(test)]
    pub(super) fn groups_not_in(&self, earlier: &ClientResponse) -> usize {
        let kept: std::collections::HashSet<*const Group> =
            earlier.groups.iter().map(Arc::as_ptr).collect();
        self.groups
            .iter()
            .filter(|group| !kept.contains(&Arc::as_ptr(group)))
            .count()
    }

    /// The same document, as the document of `version` (whose content is the same).
    pub fn retagged(&self, version: u64) -> ClientResponse {
        ClientResponse {
            plain: self.plain.clone(),
            gzip: self.gzip.clone(),
            etag: self.etag.clone(),
            version,
            groups: self.groups.clone(),
            uncompressed: self.uncompressed,
        }
    }

    /// The document of `pieces` (in name order) at `version`, reusing every group of
    /// `previous` that holds the same pieces after the same window (the same bytes before it).
    pub fn assemble<'a>(
        pieces: impl Iterator<Item = &'a PieceEntry>,
        version: u64,
        previous: Option<&ClientResponse>,
    ) -> ClientResponse {
        Self::assemble_with(pieces, version, previous, Effort::Full)
    }

    /// `assemble` with `effort`: a quick build stores the groups it makes uncompressed and
    /// keeps stored ones, a full build compresses both.
    pub fn assemble_with<'a>(
        pieces: impl Iterator<Item = &'a PieceEntry>,
        version: u64,
        previous: Option<&ClientResponse>,
        effort: Effort,
    ) -> ClientResponse {
        let previous_groups = previous.map_or(&[][..], |p| &p.groups[..]);
        let reusable: HashMap<*const ClientPiece, usize> = previous_groups
            .iter()
            .enumerate()
            .filter_map(|(i, g)| Some((Arc::as_ptr(g.members.first()?), i)))
            .collect();
        let mut previous_bytes = PreviousBytes::new(previous_groups);
        let mut groups: Vec<Arc<Group>> = Vec::new();
        let mut members: Vec<&PieceEntry> = Vec::with_capacity(MAX_GROUP);
        let mut dictionary = Vec::new();
        let mut close = |members: &mut Vec<&PieceEntry>, groups: &mut Vec<Arc<Group>>| {
            let window = Window::before(groups);
            let reused = reusable
                .get(&Arc::as_ptr(&members[0].piece))
                .filter(|&&i| previous_groups[i].is_run_of(members, &window))
                .filter(|&&i| effort == Effort::Quick || !previous_groups[i].stored);
            let group = match reused {
                Some(&i) => {
                    previous_bytes.skip_past(i);
                    Arc::clone(&previous_groups[i])
                }
                None => Arc::new(new_group(
                    members,
                    &window,
                    &mut dictionary,
                    &mut previous_bytes,
                    effort,
                )),
            };
            groups.push(group);
            members.clear();
        };
        for entry in pieces {
            members.push(entry);
            if entry.piece.ends_group || members.len() == MAX_GROUP {
                close(&mut members, &mut groups);
            }
        }
        if !members.is_empty() {
            close(&mut members, &mut groups);
        }

        let mut chunks = Vec::with_capacity(groups.len() + 2);
        chunks.push(Bytes::from_static(PREFIX));
        chunks.extend(groups.iter().map(|group| group.plain.clone()));
        chunks.push(Bytes::from_static(SUFFIX));
        let plain = PlainDocument::new(chunks);
        let gzip = gzip_of(&groups);
        let etag = etag_of(&groups, plain.len());
        let uncompressed = groups.iter().any(|group| group.stored);
        ClientResponse {
            plain,
            gzip,
            etag,
            version,
            groups,
            uncompressed,
        }
    }
}

fn strip_weak(tag: &[u8]) -> &[u8] {
    tag.strip_prefix(b"W/").unwrap_or(tag)
}

/// A group of `members` compressed after the bytes of `window` (copied into `dictionary`, a
/// scratch buffer), or stored uncompressed by a quick build. A group after another starts with the separator, so a document is the
/// prefix, its groups and the suffix. Toggles the previous document holds are copied from it;
/// only changed ones are serialised.
fn new_group(
    members: &[&PieceEntry],
    window: &Window<'_>,
    dictionary: &mut Vec<u8>,
    previous: &mut PreviousBytes<'_>,
    effort: Effort,
) -> Group {
    // Only the first group has no group before it, and so a window of none.
    let first = window.groups.is_empty();
    let stored = effort == Effort::Quick;
    if !stored {
        window.fill(dictionary);
    }
    let mut hasher = Sha256::new();
    for entry in members {
        hasher.update(entry.piece.digest);
    }
    let mut spans = Vec::with_capacity(members.len());
    let (plain, deflated) = with_scratch(|plain| {
        for (i, entry) in members.iter().enumerate() {
            if i > 0 || !first {
                plain.extend_from_slice(SEPARATOR);
            }
            let start = plain.len();
            match previous.bytes_of(&entry.piece) {
                Some(bytes) => plain.extend_from_slice(bytes),
                None => write_client_json(&entry.toggle, plain),
            }
            spans.push((offset(start), offset(plain.len())));
        }
        let deflated = match stored {
            true => Deflated::stored(plain),
            false => Deflated::of(plain, dictionary, false),
        };
        (Bytes::copy_from_slice(plain), deflated)
    });
    Group {
        members: members.iter().map(|e| Arc::clone(&e.piece)).collect(),
        digest: hasher.finalize().into(),
        after: window.id(),
        plain,
        spans: spans.into_boxed_slice(),
        deflated,
        stored,
    }
}

/// The document bytes a group's blocks may refer back into: the last `DICTIONARY` bytes
/// before it within the `WINDOW_GROUPS` groups before it (and, near the start, the prefix).
struct Window<'a> {
    /// The groups it reaches into, in document order.
    groups: &'a [Arc<Group>],
    /// Whether it reaches back to the start of the document, the prefix included.
    from_start: bool,
}

/// What identifies a window's bytes: the digests of the groups it reaches into and whether it
/// holds the prefix. A group's bytes follow from its pieces, but for the separator that leads
/// every group but the first. A window holding the prefix starts at the document's start, so
/// its groups' separators are fixed by position; any other window either is the last
/// `DICTIONARY` bytes of its groups, which a leading separator would precede, or starts after
/// the first group.
#[derive(Debug)]
struct WindowId {
    digests: Box<[[u8; 32]]>,
    from_start: bool,
}

impl<'a> Window<'a> {
    /// The window of the group that follows `groups`.
    fn before(groups: &'a [Arc<Group>]) -> Self {
        let start = groups.len().saturating_sub(WINDOW_GROUPS);
        let mut len = 0;
        for (i, group) in groups.iter().enumerate().skip(start).rev() {
            len += group.plain.len();
            if len >= DICTIONARY {
                return Self {
                    groups: &groups[i..],
                    from_start: false,
                };
            }
        }
        Self {
            groups: &groups[start..],
            from_start: start == 0,
        }
    }

    /// Whether this window holds the bytes `id` was taken of.
    fn is(&self, id: &WindowId) -> bool {
        self.from_start == id.from_start
            && self.groups.len() == id.digests.len()
            && self
                .groups
                .iter()
                .zip(&id.digests[..])
                .all(|(group, digest)| group.digest == *digest)
    }

    fn id(&self) -> WindowId {
        WindowId {
            digests: self.groups.iter().map(|group| group.digest).collect(),
            from_start: self.from_start,
        }
    }

    /// Its bytes, into `dictionary` (cleared first).
    fn fill(&self, dictionary: &mut Vec<u8>) {
        dictionary.clear();
        let prefix: &[u8] = if self.from_start { PREFIX } else { b"" };
        let parts = std::iter::once(prefix).chain(self.groups.iter().map(|g| &g.plain[..]));
        let mut skip = parts
            .clone()
            .map(<[u8]>::len)
            .sum::<usize>()
            .saturating_sub(DICTIONARY);
        for part in parts {
            let from = skip.min(part.len());
            dictionary.extend_from_slice(&part[from..]);
            skip -= from;
        }
    }
}

/// A position in a group. Groups hold at most `MAX_GROUP` toggles of a client document, far
/// below 4 GiB; a larger one would only lose the copy, never the bytes (`bytes_of` checks).
fn offset(position: usize) -> u32 {
    u32::try_from(position).unwrap_or(u32::MAX)
}

/// How far past its cursor `PreviousBytes` looks for a toggle: unchanged toggles follow each
/// other in both documents, so only removed and changed ones sit in between. (Past a longer
/// run of removed toggles the rest of the group is serialised again: slower, never wrong.)
const LOOKAHEAD: usize = 8;

/// The previous document's groups, walked in name order alongside the new document: the
/// bytes of a toggle whose piece is unchanged are found near the cursor.
struct PreviousBytes<'a> {
    groups: &'a [Arc<Group>],
    group: usize,
    member: usize,
}

impl<'a> PreviousBytes<'a> {
    fn new(groups: &'a [Arc<Group>]) -> Self {
        Self {
            groups,
            group: 0,
            member: 0,
        }
    }

    /// Moves the cursor past the previous group `index` (reused whole by the new document).
    fn skip_past(&mut self, index: usize) {
        self.group = index + 1;
        self.member = 0;
    }

    /// The JSON of `piece` if the previous document holds it within `LOOKAHEAD` toggles of the
    /// cursor (which then moves past it).
    fn bytes_of(&mut self, piece: &Arc<ClientPiece>) -> Option<&'a [u8]> {
        let (mut group, mut member) = (self.group, self.member);
        for _ in 0..LOOKAHEAD {
            let mut candidate = self.groups.get(group)?;
            if member >= candidate.members.len() {
                group += 1;
                member = 0;
                candidate = self.groups.get(group)?;
            }
            if Arc::ptr_eq(candidate.members.get(member)?, piece) {
                let (start, end) = *candidate.spans.get(member)?;
                let bytes = candidate.plain.get(start as usize..end as usize)?;
                (self.group, self.member) = (group, member + 1);
                return Some(bytes);
            }
            member += 1;
        }
        None
    }
}

/// One gzip stream: header, the prefix's and the groups' blocks, the suffix's final block,
/// then the CRC-32 of the whole (combined from the parts') and the length.
fn gzip_of(groups: &[Arc<Group>]) -> Bytes {
    let frame = frame();
    let mut parts = Vec::with_capacity(groups.len() + 2);
    parts.push(&frame.prefix);
    parts.extend(groups.iter().map(|group| &group.deflated));
    parts.push(&frame.suffix);

    let size = GZIP_HEADER.len() + parts.iter().map(|p| p.blocks.len()).sum::<usize>() + 8;
    let mut gzip = Vec::with_capacity(size);
    gzip.extend_from_slice(&GZIP_HEADER);
    let mut crc = crc32fast::Hasher::new();
    let mut len = 0u64;
    for part in parts {
        gzip.extend_from_slice(&part.blocks);
        crc.combine(&crc32fast::Hasher::new_with_initial_len(part.crc, part.len));
        len += part.len;
    }
    gzip.extend_from_slice(&crc.finalize().to_le_bytes());
    // RFC 1952: ISIZE is the length modulo 2^32.
    gzip.extend_from_slice(&(len as u32).to_le_bytes());
    Bytes::from(gzip)
}

/// `W/"<length>-<hash>"`, the hash over the groups' digests in order (and so over every
/// toggle's digest in name order), never over the whole document.
fn etag_of(groups: &[Arc<Group>], plain_len: u64) -> HeaderValue {
    let mut hasher = Sha256::new();
    for group in groups {
        hasher.update(group.digest);
    }
    let digest = hasher.finalize();
    let tag = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&digest[..18]);
    HeaderValue::from_str(&format!("W/\"{plain_len:x}-{tag}\""))
        .unwrap_or_else(|_| HeaderValue::from_static("W/\"0\""))
}
