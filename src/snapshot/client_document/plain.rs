//! The plain (uncompressed) client document: the groups' bytes, sent one buffer after the
//! other (joined into one buffer when small).

use std::sync::Arc;

use bytes::Bytes;

/// The plain document as the chunks it is made of: large documents are never copied whole
/// per version, the response body sends the groups' bytes one after the other.
#[derive(Debug, Clone)]
pub struct PlainDocument {
    chunks: Arc<[Bytes]>,
    len: u64,
}

/// Documents up to this size are one chunk (one buffer to send, like any small body; copying
/// it per version costs far less than sending it in pieces to every poller).
const SINGLE_CHUNK_MAX: usize = 1024 * 1024;

impl PlainDocument {
    /// The document of these chunks, in order (joined when small).
    pub(super) fn new(mut chunks: Vec<Bytes>) -> Self {
        let len = chunks.iter().map(Bytes::len).sum::<usize>();
        if len <= SINGLE_CHUNK_MAX && chunks.len() > 1 {
            let mut whole = Vec::with_capacity(len);
            for chunk in &chunks {
                whole.extend_from_slice(chunk);
            }
            chunks = vec![Bytes::from(whole)];
        }
        Self {
            chunks: chunks.into(),
            len: len as u64,
        }
    }

    /// The length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the document has no bytes (never: it is at least `{"version":1,...}`).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The whole document in one buffer.
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
