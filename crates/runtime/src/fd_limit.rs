//! The open-files limit: a process that holds one file descriptor per
//! connection raises its soft limit to the hard one at start, as Go's
//! runtime does, so that its connection caps (e.g. `--http-max-connections`,
//! 4,096 by default) bind before the common soft default of 1,024 does.

use rustix::process::{Resource, getrlimit, setrlimit};

/// Raises the soft `RLIMIT_NOFILE` to the hard limit. Returns the soft
/// limit now in force (`None`: unlimited), or why it could not be raised.
pub fn raise_open_files_limit() -> Result<Option<u64>, String> {
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current == limit.maximum {
        return Ok(limit.current);
    }
    limit.current = limit.maximum;
    setrlimit(Resource::Nofile, limit).map_err(|e| {
        format!(
            "cannot raise the open-files limit to {:?}: {e}",
            limit.maximum
        )
    })?;
    Ok(limit.current)
}

/// The soft `RLIMIT_NOFILE` in force (`None`: unlimited).
pub fn open_files_limit() -> Option<u64> {
    getrlimit(Resource::Nofile).current
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_reaches_the_hard_one() {
        let raised = raise_open_files_limit().expect("raising to the hard limit is allowed");
        assert_eq!(raised, getrlimit(Resource::Nofile).maximum);
        assert_eq!(open_files_limit(), raised);
    }
}
