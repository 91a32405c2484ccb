//! Runs the netfilter tools for one IP family: `iptables-save` to read the
//! current rules, `iptables-restore --noflush` to change them in one
//! transaction, and `nft delete table` to remove a nat or raw table that
//! install created (the nft backend only).
//!
//! Owns every process this command starts; it never builds rules itself.

use std::ffi::OsStr;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::Error;
use super::rules::Family;
use super::state::Table;

/// Where tools are looked for after `PATH`: root's `PATH` has them, but
/// `su` without `-` keeps a user's `PATH` without the sbin directories.
const SBIN: [&str; 2] = ["/usr/sbin", "/sbin"];

/// Finds `name` in `path` (a `PATH` value), then in [`SBIN`].
pub(crate) fn find_tool(name: &str, path: Option<&OsStr>) -> Option<PathBuf> {
    let dirs = path.map(std::env::split_paths).into_iter().flatten();
    dirs.chain(SBIN.iter().map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The tools of one family, found.
pub(crate) struct Tools {
    family: Family,
    save: PathBuf,
    restore: PathBuf,
    /// The tools drive nf_tables (not the legacy x_tables).
    pub(crate) nft_backend: bool,
}

fn tool(name: String) -> Result<PathBuf, Error> {
    find_tool(&name, std::env::var_os("PATH").as_deref()).ok_or(Error::MissingTool { tool: name })
}

fn run(path: &Path, args: &[&str], input: Option<&str>) -> Result<std::process::Output, Error> {
    let what = || format!("run {} {}", path.display(), args.join(" "));
    let mut child = Command::new(path)
        .args(args)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::Io {
            what: what(),
            source: e,
        })?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin.write_all(text.as_bytes()).map_err(|e| Error::Io {
            what: what(),
            source: e,
        })?;
    }
    child.wait_with_output().map_err(|e| Error::Io {
        what: what(),
        source: e,
    })
}

impl Tools {
    /// Finds `iptables-save` and `iptables-restore` (or the ip6tables
    /// ones) and asks which backend they drive.
    pub(crate) fn find(family: Family) -> Result<Tools, Error> {
        let save = tool(format!("{}-save", family.tool()))?;
        let restore = tool(format!("{}-restore", family.tool()))?;
        let version = run(&restore, &["--version"], None)?;
        let nft_backend = String::from_utf8_lossy(&version.stdout).contains("nf_tables");
        Ok(Tools {
            family,
            save,
            restore,
            nft_backend,
        })
    }

    /// The current rules of every table (`iptables-save`). Unlike
    /// `iptables-save -t nat`, it shows no `*nat` section when the nft
    /// backend has no nat table.
    pub(crate) fn save(&self) -> Result<String, Error> {
        let out = run(&self.save, &[], None)?;
        if !out.status.success() {
            return Err(Error::Refused {
                tool: self.save.display().to_string(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Feeds `input` to `iptables-restore --noflush` (with `--test`: only
    /// checks it). On refusal the error carries the tool's stderr and the
    /// input line it names.
    pub(crate) fn restore(&self, input: &str, test: bool) -> Result<(), Error> {
        let mut args = vec!["--noflush", "--wait", "10"];
        if test {
            args.push("--test");
        }
        let out = run(&self.restore, &args, Some(input))?;
        if out.status.success() {
            return Ok(());
        }
        let mut stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
        if let Some(line) = failed_line(&stderr, input) {
            stderr.push_str(&format!("\n  (line: {line})"));
        }
        Err(Error::Refused {
            tool: self.restore.display().to_string(),
            stderr,
        })
    }

    /// Deletes this family's `table` with `nft`. `Ok(false)` when `nft` is
    /// not installed.
    pub(crate) fn delete_table(&self, table: Table) -> Result<bool, Error> {
        let Some(nft) = find_tool("nft", std::env::var_os("PATH").as_deref()) else {
            return Ok(false);
        };
        let out = run(
            &nft,
            &["delete", "table", self.family.nft(), table.name()],
            None,
        )?;
        if !out.status.success() {
            return Err(Error::Refused {
                tool: nft.display().to_string(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        Ok(true)
    }
}

/// The input line that iptables-restore's stderr names: "Error occurred at
/// line: N" (a parse error), or "line N: ..." (nf_tables refused it).
fn failed_line<'a>(stderr: &str, input: &'a str) -> Option<&'a str> {
    let n: usize = stderr.split("line").skip(1).find_map(|rest| {
        let digits = rest.trim_start_matches([':', ' ']);
        let end = digits.find(|c: char| !c.is_ascii_digit())?;
        digits[..end].parse().ok()
    })?;
    input.lines().nth(n.checked_sub(1)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_are_found_in_path_then_sbin() {
        let dir = std::env::temp_dir().join(format!("meshlink-tools-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("iptables-restore-test-tool"), "").unwrap();
        let path = std::env::join_paths([Path::new("/nonexistent"), &dir]).unwrap();
        assert_eq!(
            find_tool("iptables-restore-test-tool", Some(&path)),
            Some(dir.join("iptables-restore-test-tool"))
        );
        assert_eq!(find_tool("no-such-tool-meshlink", Some(&path)), None);
        let _ = std::fs::remove_dir_all(dir);
        let e = Error::MissingTool {
            tool: "iptables-restore".into(),
        }
        .to_string();
        assert!(
            e.contains("iptables-restore not found") && e.contains("apt-get install iptables"),
            "{e}"
        );
    }

    #[test]
    fn the_refused_line_is_quoted() {
        let input = "*nat\n-A OUTPUT -j NOPE\nCOMMIT\n";
        let stderr = "iptables-restore v1.8.9 (nf_tables): Chain 'NOPE' does not exist\nError occurred at line: 2\nTry `iptables-restore -h' for more information.";
        assert_eq!(failed_line(stderr, input), Some("-A OUTPUT -j NOPE"));
        let nft = "iptables-restore v1.8.9 (nf_tables): \nline 3: CHAIN_DEL failed (Device or resource busy): chain X";
        assert_eq!(failed_line(nft, input), Some("COMMIT"));
        assert_eq!(failed_line("no line", input), None);
    }
}
