//! A client document's body, plain or gzip: the buffers it is made of, sent one after the
//! other (or joined into one buffer).

use std::sync::Arc;

use bytes::Bytes;

/// A document body as the chunks it is made of: large documents are never copied whole per
/// version, the response sends the groups' bytes one after the other.
#[derive(Debug, Clone)]
pub struct DocumentBody {
    chunks: Arc<[Bytes]>,
    len: u64,
}

/// Documents up to this size are one chunk (one buffer to send, like any small body; copying
/// it per version costs far less than sending it in pieces to every poller).
const SINGLE_CHUNK_MAX: usize = 1024 * 1024;

impl DocumentBody {
    /// The body of these chunks, in order, joined when small.
    pub(super) fn new(chunks: Vec<Bytes>) -> Self {
        let len = chunks.iter().map(Bytes::len).sum::<usize>();
        match len <= SINGLE_CHUNK_MAX {
            true => Self::joined(chunks),
            false => Self::parts(chunks),
        }
    }

    /// The body of these chunks joined into one buffer.
    pub(super) fn joined(chunks: Vec<Bytes>) -> Self {
        if chunks.len() == 1 {
            return Self::parts(chunks);
        }
        let len = chunks.iter().map(Bytes::len).sum::<usize>();
        let mut whole = Vec::with_capacity(len);
        for chunk in &chunks {
            whole.extend_from_slice(chunk);
        }
        Self::parts(vec![Bytes::from(whole)])
    }

    /// The body of these chunks, sent one after the other.
    pub(super) fn parts(chunks: Vec<Bytes>) -> Self {
        let len = chunks.iter().map(Bytes::len).sum::<usize>();
        Self {
            chunks: chunks.into(),
            len: len as u64,
        }
    }

    /// The length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the body has no bytes (never: a document is at least `{"version":1,...}`).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The whole body in one buffer.
    pub fn to_vec(&self) -> Vec<u8> {
        self.chunks.iter().flat_map(|c| c.iter().copied()).collect()
    }

    /// A response body sending the chunks.
    pub fn body(&self) -> axum::body::Body {
        match &*self.chunks {
            [single] => axum::body::Body::from(single.clone()),
            _ => axum::body::Body::new(ChunkedBody {
                chunks: self.chunks.clone(),
                next: 0,
                remaining: self.len,
            }),
        }
    }
}

/// A body of known length sent as a list of shared buffers.
struct ChunkedBody {
    chunks: Arc<[Bytes]>,
    next: usize,
    remaining: u64,
}

impl http_body::Body for ChunkedBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        let chunk = self.chunks.get(self.next).cloned();
        std::task::Poll::Ready(chunk.map(|chunk| {
            self.next += 1;
            self.remaining -= chunk.len() as u64;
            Ok(http_body::Frame::data(chunk))
        }))
    }

    fn is_end_stream(&self) -> bool {
        self.next >= self.chunks.len()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.remaining)
    }
}
