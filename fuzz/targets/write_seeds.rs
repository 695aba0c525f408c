//! Writes the seed corpus of the `packet` target into the directory named
//! by the first argument (one file per request).

fn main() -> std::io::Result<()> {
    let dir = std::env::args().nth(1).unwrap_or_else(|| "seeds".into());
    std::fs::create_dir_all(&dir)?;
    for (i, seed) in skydns_fuzz::seeds().iter().enumerate() {
        std::fs::write(format!("{dir}/seed-{i:04}"), seed)?;
    }
    Ok(())
}
