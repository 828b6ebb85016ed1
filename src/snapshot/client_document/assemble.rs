//! Assembles a client document from pieces: the plain body as the groups' bytes in order,
//! the gzip body from each group's compressed stretch, and the ETag from digests.
//!
//! Each group is compressed once (`gzip`), with up to 32 KiB of the document just before it
//! (from at most two groups) as preset dictionary, so it compresses almost as well as inside
//! one stream. The groups of the previous version of the same document are reused where they
//! hold the same toggles after the same bytes: a changed toggle recompresses its group and the
//! groups whose dictionary reaches into it (at most the next two).
//!
//! A build a writer waits for (`Effort::Quick`) stores those groups uncompressed instead, and
//! visits only the stretches of the document around the changed toggles (`splice`): the
//! writer is answered only once the document serves its write, and compressing and walking
//! every toggle are most of a build's time. The builds nobody waits for (`Effort::Gradual`)
//! compress them, a bounded number per build; the ETag, made of digests, is the same either
//! way.

use std::ops::{Bound, Range};
use std::sync::{Arc, OnceLock};

use axum::http::HeaderValue;
use base64::Engine;
use bytes::Bytes;
use sha2::{Digest, Sha256};

use super::body::DocumentBody;
use super::form::FormContext;
use super::gzip::{gzip_body, Deflated};
use super::piece::{with_scratch, ClientPiece, PieceEntry, PieceList};
use crate::domain::filter::FeatureFilter;
use crate::domain::text::Text;

/// spec §4.1: the client format is version 1; the toggles follow.
const PREFIX: &[u8] = br#"{"version":1,"features":["#;
const SEPARATOR: &[u8] = b",";
/// A group never grows past this many toggles, whatever the names (bounds the work a change
/// costs when names happen to cluster).
const MAX_GROUP: usize = 128;
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

/// How many groups a gradual build compresses: about 1.5 ms of work (groups of about 18 KiB
/// at 10,000 toggles).
pub(super) const GRADUAL_GROUPS: usize = 16;

/// How much a build compresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effort {
    /// Every group compressed (stored groups of earlier builds too).
    Full,
    /// Like `Full` for the first `GRADUAL_GROUPS` groups it must compress, then like `Quick`:
    /// a build that holds up the writers arriving meanwhile for a bounded time. (Under
    /// thousands of writes a second, quick builds store every group again within tens of
    /// milliseconds anyway; compressing all of them at once cost those writers a p99 of
    /// 13 ms at 10,000 toggles.)
    Gradual,
    /// Groups that must be made again are stored uncompressed, for a later full build.
    Quick,
}

/// The fixed stretch that starts every document's gzip body: the prefix. (The suffix, with
/// the final block, is the form's: `FormContext::suffix`.)
fn prefix() -> &'static (Deflated, Bytes) {
    static PREFIX_STRETCH: OnceLock<(Deflated, Bytes)> = OnceLock::new();
    PREFIX_STRETCH.get_or_init(|| (Deflated::of(PREFIX, b"", false), Bytes::from_static(PREFIX)))
}

/// A run of consecutive toggles, joined and compressed together.
#[derive(Debug)]
pub struct Group {
    /// The pieces, to recognise the same run in the next build (pieces are shared between
    /// versions, so the same pointers are the same content).
    members: Vec<Arc<ClientPiece>>,
    /// The name of its last toggle: where the group lies in name order.
    last: Text,
    /// SHA-256 over the pieces' digests: the group's content identity.
    digest: [u8; 32],
    /// What its blocks may refer back into: the window of the document before it.
    after: WindowId,
    /// The toggles' JSON joined by the separator (and led by one, after another group).
    plain: Bytes,
    /// Where each member's JSON lies in `plain` (start, end), so a later group holding the
    /// same toggle copies its bytes instead of serialising it again.
    spans: Box<[(u32, u32)]>,
    /// Its stretch of the gzip body (stored by a quick build, for a full build to compress).
    pub(super) deflated: Deflated,
}

impl Group {
    /// Whether it holds exactly these pieces, in order.
    fn holds(&self, members: &[&PieceEntry]) -> bool {
        self.members.len() == members.len()
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
    pub plain: DocumentBody,
    pub gzip: DocumentBody,
    /// Weak validator derived from the content alone: identical content gives the identical
    /// ETag on every replica (gzip and plain are one representation, hence weak).
    pub etag: HeaderValue,
    /// The configuration version the document was built from (0: not from one).
    pub version: u64,
    /// The groups, for the next build of the same document to reuse.
    pub(super) groups: Vec<Arc<Group>>,
    /// Whether a group is stored uncompressed (a quick build's): a full build compresses it.
    pub uncompressed: bool,
}

impl ClientResponse {
    /// Whether an `If-None-Match` header value matches this response (weak comparison,
    /// comma-separated lists and `*` allowed).
    pub fn matches(&self, if_none_match: &[u8]) -> bool {
        // What SDKs send: the ETag as it was served (one comparison on every poll's 304).
        if if_none_match == self.etag.as_bytes() {
            return true;
        }
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

    /// The document of `pieces` (in name order, made in `form`) at `version`, reusing every
    /// group of `previous` that holds the same pieces after the same window (the same bytes
    /// before it).
    pub fn assemble<'a>(
        pieces: impl Iterator<Item = &'a PieceEntry>,
        form: &FormContext,
        version: u64,
        previous: Option<&ClientResponse>,
    ) -> ClientResponse {
        Self::assemble_with(pieces, form, version, previous, Effort::Full)
    }

    /// `assemble` with `effort`: a quick build stores the groups it makes uncompressed and
    /// keeps stored ones, a full build compresses both.
    pub fn assemble_with<'a>(
        pieces: impl Iterator<Item = &'a PieceEntry>,
        form: &FormContext,
        version: u64,
        previous: Option<&ClientResponse>,
        effort: Effort,
    ) -> ClientResponse {
        let mut assembly = Assembly::new(previous.map_or(&[][..], |p| &p.groups[..]), form, effort);
        assembly.walk(pieces, |_| false);
        assembly.finish(version)
    }

    /// A quick build of the document of the toggles of `pieces` that `filter` selects, from
    /// `previous`, the same document one version before (`pieces.previous_version`): only
    /// the stretches around the changed toggles are walked and made again (stored); every
    /// other group is taken over as it is, stored ones too.
    pub fn splice(
        pieces: &PieceList,
        filter: &FeatureFilter,
        previous: &ClientResponse,
    ) -> ClientResponse {
        let mut names: Vec<&str> = pieces
            .changed
            .iter()
            .flat_map(|(before, after)| [before, after])
            .flatten()
            .map(|toggle| toggle.name.as_str())
            .collect();
        names.sort_unstable();
        names.dedup();
        let old = &previous.groups[..];
        let mut assembly = Assembly::new(old, &pieces.form, Effort::Quick);
        let mut pending = &names[..];
        let mut next_old = 0;
        while let Some(&name) = pending.first() {
            // The first group that may change: the one the name falls into (or before), or
            // the last, which ended with the toggles rather than at a group's end.
            let changed = old
                .partition_point(|group| group.last.as_str() < name)
                .min(old.len().saturating_sub(1));
            assembly.take_over(next_old..changed.max(next_old));
            let from = match assembly.groups.last() {
                Some(group) => Bound::Excluded(group.last.as_str()),
                None => Bound::Unbounded,
            };
            let entries = pieces
                .entries
                .range::<_, str>((from, Bound::Unbounded))
                .map(|(_, entry)| entry)
                .filter(|entry| filter.matches(&entry.toggle));
            // Past the changed names, groups realign with the previous document's; once
            // enough of them are the same that the next one's window is too, the rest up to
            // the next changed name are taken over.
            let realigned = assembly.walk(entries, |assembly| {
                let last = assembly
                    .groups
                    .last()
                    .map_or("", |group| group.last.as_str());
                while pending.first().is_some_and(|name| *name <= last) {
                    pending = &pending[1..];
                }
                assembly.reused_run >= WINDOW_GROUPS
                    && assembly.windows_align()
                    && assembly.candidate < old.len()
            });
            if !realigned {
                return assembly.finish(pieces.version);
            }
            next_old = assembly.candidate;
        }
        assembly.take_over(next_old..old.len());
        assembly.finish(pieces.version)
    }
}

/// A document being assembled: the groups so far, and the previous document's groups it may
/// reuse.
struct Assembly<'a> {
    /// The form the toggles are serialised in, and the document's suffix.
    form: &'a FormContext,
    /// How many more groups this build compresses (it stores the others).
    to_compress: usize,
    previous: &'a [Arc<Group>],
    /// The previous group the next group may be: groups are in name order.
    candidate: usize,
    previous_bytes: PreviousBytes<'a>,
    pub(super) groups: Vec<Arc<Group>>,
    /// How many groups at the end of `groups` are the previous document's, consecutive.
    reused_run: usize,
    /// Scratch buffer for a group's dictionary.
    dictionary: Vec<u8>,
}

impl<'a> Assembly<'a> {
    fn new(previous: &'a [Arc<Group>], form: &'a FormContext, effort: Effort) -> Self {
        Self {
            form,
            to_compress: match effort {
                Effort::Full => usize::MAX,
                Effort::Gradual => GRADUAL_GROUPS,
                Effort::Quick => 0,
            },
            previous,
            candidate: 0,
            previous_bytes: PreviousBytes::new(previous),
            groups: Vec::with_capacity(previous.len() + 1),
            reused_run: 0,
            dictionary: Vec::new(),
        }
    }

    /// Appends the previous groups `range` as they are (their toggles and the bytes before
    /// them unchanged).
    fn take_over(&mut self, range: Range<usize>) {
        if range.is_empty() {
            return;
        }
        self.groups.extend_from_slice(&self.previous[range.clone()]);
        self.reused_run += range.len();
        self.candidate = range.end;
        self.previous_bytes.skip_past(range.end - 1);
    }

    /// Whether the next group's window, made of reused groups, stands where the previous
    /// document's next group's did: at the same index, or both past the groups whose window
    /// may reach back to the prefix.
    fn windows_align(&self) -> bool {
        let (new, old) = (self.groups.len(), self.candidate);
        new == old || (new > WINDOW_GROUPS && old > WINDOW_GROUPS)
    }

    /// Groups `entries` (in name order, following the groups so far) until they run out or
    /// `enough` says so after a group; returns whether it did.
    fn walk<'e>(
        &mut self,
        entries: impl Iterator<Item = &'e PieceEntry>,
        mut enough: impl FnMut(&Self) -> bool,
    ) -> bool {
        let mut members: Vec<&PieceEntry> = Vec::with_capacity(MAX_GROUP);
        for entry in entries {
            members.push(entry);
            if entry.piece.ends_group || members.len() == MAX_GROUP {
                self.close(&members);
                members.clear();
                if enough(self) {
                    return true;
                }
            }
        }
        if !members.is_empty() {
            self.close(&members);
        }
        false
    }

    /// Appends the group of `members`: the previous document's if it holds the same pieces
    /// after the same window (and is compressed, for a full build), else a new one.
    fn close(&mut self, members: &[&PieceEntry]) {
        let window = Window::before(&self.groups);
        let first = members[0].toggle.name.as_str();
        while self
            .previous
            .get(self.candidate)
            .is_some_and(|group| group.last.as_str() < first)
        {
            self.candidate += 1;
        }
        // Stored blocks refer to nothing before them: a stored group is as good after any
        // window (unless this build still compresses), but for its leading separator, which
        // only the first group lacks.
        let compress = self.to_compress > 0;
        let reused = self.previous.get(self.candidate).filter(|group| {
            group.holds(members)
                && match group.deflated.is_stored() {
                    true => !compress && window.groups.is_empty() == group.after.is_first(),
                    false => window.is(&group.after),
                }
        });
        let group = match reused {
            Some(group) => {
                self.previous_bytes.skip_past(self.candidate);
                self.candidate += 1;
                self.reused_run += 1;
                Arc::clone(group)
            }
            None => {
                self.reused_run = 0;
                if compress {
                    self.to_compress -= 1;
                }
                Arc::new(new_group(
                    members,
                    self.form,
                    &window,
                    &mut self.dictionary,
                    &mut self.previous_bytes,
                    compress,
                ))
            }
        };
        self.groups.push(group);
    }

    /// The document of the groups at `version`.
    fn finish(self, version: u64) -> ClientResponse {
        let groups = self.groups;
        let mut chunks = Vec::with_capacity(groups.len() + 2);
        let suffix = &self.form.suffix;
        chunks.push(Bytes::from_static(PREFIX));
        chunks.extend(groups.iter().map(|group| group.plain.clone()));
        chunks.push(suffix.plain.clone());
        let plain = DocumentBody::new(chunks);
        let prefix = prefix();
        let stretches = std::iter::once((&prefix.0, &prefix.1))
            .chain(groups.iter().map(|group| (&group.deflated, &group.plain)))
            .chain(std::iter::once((&suffix.deflated, &suffix.plain)));
        let gzip = gzip_body(stretches);
        let etag = etag_of(&groups, &suffix.digest, plain.len());
        let uncompressed = groups.iter().any(|group| group.deflated.is_stored());
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
/// scratch buffer), or else stored uncompressed. A group after another starts with
/// the separator, so a document is the prefix, its groups and the suffix. Toggles the previous
/// document holds are copied from it; only changed ones are serialised.
fn new_group(
    members: &[&PieceEntry],
    form: &FormContext,
    window: &Window<'_>,
    dictionary: &mut Vec<u8>,
    previous: &mut PreviousBytes<'_>,
    compress: bool,
) -> Group {
    // Only the first group has no group before it, and so a window of none.
    let first = window.groups.is_empty();
    if compress {
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
                None => form.write_client_json(&entry.toggle, plain),
            }
            spans.push((offset(start), offset(plain.len())));
        }
        let deflated = match compress {
            true => Deflated::of(plain, dictionary, false),
            false => Deflated::stored(plain),
        };
        (Bytes::copy_from_slice(plain), deflated)
    });
    Group {
        members: members.iter().map(|e| Arc::clone(&e.piece)).collect(),
        last: members
            .last()
            .map_or_else(Text::default, |e| e.toggle.name.clone()),
        digest: hasher.finalize().into(),
        after: window.id(),
        plain,
        spans: spans.into_boxed_slice(),
        deflated,
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

impl WindowId {
    /// Whether it is the first group's window (no group before it).
    fn is_first(&self) -> bool {
        self.digests.is_empty()
    }
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

/// `W/"<length>-<hash>"`, the hash over the groups' digests in order (and so over every
/// toggle's digest in name order), never over the whole document.
fn etag_of(groups: &[Arc<Group>], suffix: &[u8; 32], plain_len: u64) -> HeaderValue {
    let mut hasher = Sha256::new();
    for group in groups {
        hasher.update(group.digest);
    }
    hasher.update(suffix);
    let digest = hasher.finalize();
    let tag = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&digest[..18]);
    HeaderValue::from_str(&format!("W/\"{plain_len:x}-{tag}\""))
        .unwrap_or_else(|_| HeaderValue::from_static("W/\"0\""))
}
