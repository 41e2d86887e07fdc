//! The libcuda slots, shared between the users whose files take them. Any
//! user can make copies of the real libcuda (a valid library with cuInit)
//! and load them: without a share, 32 such copies would leave no slot for
//! another tenant's libcuda, or for the system's. A file owned by root
//! (the driver's own, a container image's, a bind mount of the host's) is
//! always hooked while a slot is free; one user's files take at most
//! [`PER_OWNER`] slots, and all users' files together at most
//! [`UNPRIVILEGED`], so root's always find [`MAX_COPIES`] − [`UNPRIVILEGED`].

/// At most this many distinct libcuda files are hooked.
pub(super) const MAX_COPIES: usize = 32;
/// Slots the files of one user other than root can take.
pub(super) const PER_OWNER: usize = 8;
/// Slots the files of every user other than root can take together.
pub(super) const UNPRIVILEGED: usize = 24;

/// Whether a file owned by `owner` may take a slot, given the owners of
/// the files that hold one now; Err says why not, for the file's name.
pub(super) fn admit(owner: u32, holders: &[u32]) -> Result<(), String> {
    if holders.len() >= MAX_COPIES {
        return Err(format!("{MAX_COPIES} libcuda files are hooked already"));
    }
    if owner == 0 {
        return Ok(());
    }
    let mine = holders.iter().filter(|&&o| o == owner).count();
    if mine >= PER_OWNER {
        return Err(format!(
            "uid {owner}'s files hold {mine} of the {MAX_COPIES} libcuda slots already (each user's copies get at most {PER_OWNER}, so that one user's cannot leave none to the others)"
        ));
    }
    let users = holders.iter().filter(|&&o| o != 0).count();
    if users >= UNPRIVILEGED {
        return Err(format!(
            "files of users other than root hold {users} of the {MAX_COPIES} libcuda slots already (the rest is kept for root's, such as the driver's own)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_users_copies_leave_slots_to_the_others_and_to_root() {
        let mut holders = Vec::new();
        for _ in 0..PER_OWNER {
            admit(1000, &holders).expect("a user's first copies");
            holders.push(1000);
        }
        let e = admit(1000, &holders).expect_err("the share is taken");
        assert!(e.contains("uid 1000's files hold 8 of the 32"), "{e}");
        admit(1001, &holders).expect("another user");
        admit(0, &holders).expect("root");
        // Three users at their share: the rest is root's.
        holders.extend([1001; PER_OWNER]);
        holders.extend([1002; PER_OWNER]);
        let e = admit(1003, &holders).expect_err("no unprivileged slot left");
        assert!(e.contains("other than root hold 24 of the 32"), "{e}");
        for _ in 0..MAX_COPIES - UNPRIVILEGED {
            admit(0, &holders).expect("root's slots");
            holders.push(0);
        }
        let e = admit(0, &holders).expect_err("every slot taken");
        assert_eq!(e, "32 libcuda files are hooked already");
    }
}
