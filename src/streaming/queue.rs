//! `FrameQueue`: the bounded queue between the fan-out and one stream's response body, and
//! `EventStream`, that body. An idle queue holds no allocation beyond itself (a `VecDeque`
//! allocates on first use), so an idle stream costs its queue, its place in its group and
//! what the HTTP connection itself holds.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::task::AtomicWaker;

use super::hub::Subscription;

/// Why a frame was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushError {
    /// The reader is too slow: the queue holds its limit.
    Full,
    /// The stream has ended.
    Closed,
}

/// A bounded frame queue with one reader.
pub struct FrameQueue {
    state: Mutex<QueueState>,
    reader: AtomicWaker,
    capacity: usize,
}

#[derive(Default)]
struct QueueState {
    frames: VecDeque<Bytes>,
    closed: bool,
}

impl FrameQueue {
    /// An empty queue of at most `capacity` frames.
    pub fn new(capacity: usize) -> Self {
        Self {
            state: Mutex::new(QueueState::default()),
            reader: AtomicWaker::new(),
            capacity: capacity.max(1),
        }
    }

    /// Queues `frame` for the reader.
    pub fn push(&self, frame: Bytes) -> Result<(), PushError> {
        {
            let mut state = self.state.lock().map_err(|_| PushError::Closed)?;
            if state.closed {
                return Err(PushError::Closed);
            }
            if state.frames.len() >= self.capacity {
                return Err(PushError::Full);
            }
            state.frames.push_back(frame);
        }
        self.reader.wake();
        Ok(())
    }

    /// Queues `frame` if there is room, then ends the stream: the reader gets what is queued,
    /// then the end.
    pub fn close_with(&self, frame: Option<Bytes>) {
        if let Ok(mut state) = self.state.lock() {
            if let Some(frame) = frame {
                if !state.closed && state.frames.len() < self.capacity + 1 {
                    state.frames.push_back(frame);
                }
            }
            state.closed = true;
        }
        self.reader.wake();
    }

    /// The next frame; `None` once the queue is closed and drained.
    pub fn poll_next(&self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        self.reader.register(cx.waker());
        let Ok(mut state) = self.state.lock() else {
            return Poll::Ready(None);
        };
        match state.frames.pop_front() {
            Some(frame) => Poll::Ready(Some(frame)),
            None if state.closed => Poll::Ready(None),
            None => Poll::Pending,
        }
    }
}

/// The response body of one stream: its first frame, then what the fan-out queues. Dropping
/// it (the client went away, the stream ended) leaves its group.
pub struct EventStream {
    first: Option<Bytes>,
    subscription: Subscription,
}

impl EventStream {
    /// A stream that sends `first`, then the frames of `subscription`.
    pub fn new(first: Bytes, subscription: Subscription) -> Self {
        Self {
            first: Some(first),
            subscription,
        }
    }
}

impl http_body::Body for EventStream {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        if let Some(first) = self.first.take() {
            return Poll::Ready(Some(Ok(http_body::Frame::data(first))));
        }
        self.subscription
            .queue()
            .poll_next(cx)
            .map(|frame| frame.map(|f| Ok(http_body::Frame::data(f))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_queue_refuses_and_a_closed_one_drains_then_ends() {
        let queue = FrameQueue::new(2);
        assert_eq!(queue.push(Bytes::from_static(b"a")), Ok(()));
        assert_eq!(queue.push(Bytes::from_static(b"b")), Ok(()));
        assert_eq!(queue.push(Bytes::from_static(b"c")), Err(PushError::Full));
        queue.close_with(Some(Bytes::from_static(b"bye")));
        assert_eq!(queue.push(Bytes::from_static(b"d")), Err(PushError::Closed));
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let mut got = Vec::new();
        while let Poll::Ready(Some(frame)) = queue.poll_next(&mut cx) {
            got.push(frame);
        }
        assert_eq!(got, ["a", "b", "bye"]);
        assert_eq!(queue.poll_next(&mut cx), Poll::Ready(None));
    }
}
