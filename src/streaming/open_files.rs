//! Raising the open-files soft limit: every stream holds a socket, and the soft limit a
//! process inherits (often 1,024) is far below what a replica holding streams needs.

/// Raises the soft limit on open files to the hard limit; returns the limit in force.
pub fn raise_open_files_limit() -> Option<u64> {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let limit = getrlimit(Resource::Nofile);
    let (Some(soft), hard) = (limit.current, limit.maximum) else {
        // Unlimited already.
        return None;
    };
    let target = hard.unwrap_or(soft);
    if target <= soft {
        return Some(soft);
    }
    let raised = rustix::process::Rlimit {
        current: Some(target),
        maximum: hard,
    };
    match setrlimit(Resource::Nofile, raised) {
        Ok(()) => {
            tracing::info!(from = soft, to = target, "open-files soft limit raised");
            Some(target)
        }
        Err(e) => {
            tracing::warn!(error = %e, soft, "open-files soft limit not raised");
            Some(soft)
        }
    }
}
