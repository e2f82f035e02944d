//! Regenerates `man/` and `completions/` from the clap definitions:
//! `cargo run --example gen-docs`. The integration test `docs` fails while
//! the committed files differ from this output.

use std::path::Path;

fn main() -> std::io::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for file in redlock::docs::files() {
        let path = root.join(&file.path);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&path, &file.content)?;
        println!("wrote {}", file.path);
    }
    Ok(())
}
