//! A run folder that is either whole or absent: everything is written into a
//! hidden `.tmp-…` folder (the time series while the run measures, the rest
//! after) and renamed into place at the end; an existing name gets a `-2`,
//! `-3`, … suffix instead of being overwritten.

use std::io;
use std::path::{Path, PathBuf};

#[derive(Debug)]
pub struct RunFolder {
    out: PathBuf,
    base: String,
    tmp: PathBuf,
}

impl RunFolder {
    pub fn create(out: &Path, base: &str) -> io::Result<RunFolder> {
        std::fs::create_dir_all(out)?;
        let tmp = out.join(format!(".tmp-{base}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir(&tmp)?;
        Ok(RunFolder { out: out.to_owned(), base: base.to_owned(), tmp })
    }

    /// Where files go until [`RunFolder::commit`].
    pub fn path(&self) -> &Path {
        &self.tmp
    }

    /// Renames the folder into place under a name not taken yet.
    pub fn commit(self) -> io::Result<PathBuf> {
        let mut n = 1u32;
        loop {
            let dest = self.out.join(if n == 1 { self.base.clone() } else { format!("{}-{n}", self.base) });
            n += 1;
            if dest.exists() {
                continue;
            }
            match std::fs::rename(&self.tmp, &dest) {
                Ok(()) => return Ok(dest),
                // Lost a race with another run taking the same name: try the next.
                Err(_) if dest.exists() => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Removes the folder: nothing was measured.
    pub fn discard(self) {
        let _ = std::fs::remove_dir_all(&self.tmp);
    }
}
