//! Writes the built-in contract's calls as a team's own data: `COUNT`
//! requests as the harness makes them (`requestId` `FIRST`, `FIRST` + 1, …,
//! `ITEMS` records; `FIRST` with as many digits as most of a run's ids)
//! and the answers the built-in downstream gives them, each line the proto3
//! JSON mapping of `bench.v1.FetchRequest` / `FetchResponse`. Call n of the
//! own-contract path then sends and gets what call n of the built-in path
//! does (bench/contract-overhead.py).
//!
//!     cargo run --release -p contract --example builtin_data -- DIR [ITEMS] [COUNT] [FIRST]

use std::io::Write;

use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = std::path::PathBuf::from(args.next().ok_or("usage: builtin_data DIR [ITEMS] [COUNT] [FIRST]")?);
    let items: u32 = args.next().map_or(Ok(10), |a| a.parse())?;
    let count: u32 = args.next().map_or(Ok(64), |a| a.parse())?;
    let first: u32 = args.next().map_or(Ok(10_000), |a| a.parse())?;
    let pool = DescriptorPool::decode(proto::FILE_DESCRIPTOR_SET)?;
    let desc = |name: &str| pool.get_message_by_name(name).ok_or(format!("no {name}"));
    let (request, response) = (desc("bench.v1.FetchRequest")?, desc("bench.v1.FetchResponse")?);
    std::fs::create_dir_all(&dir)?;
    let mut requests = std::io::BufWriter::new(std::fs::File::create(dir.join("requests.jsonl"))?);
    let mut answers = std::io::BufWriter::new(std::fs::File::create(dir.join("answers.jsonl"))?);
    for n in first..first + count {
        let req = payload::FetchRequest { request_id: n.to_string(), items, ..payload::FetchRequest::default() };
        let answer = payload::respond(&req);
        let q = DynamicMessage::decode(request.clone(), proto::FetchRequest::from(req).encode_to_vec().as_slice())?;
        let a =
            DynamicMessage::decode(response.clone(), proto::FetchResponse::from(answer).encode_to_vec().as_slice())?;
        requests.write_all(&contract::to_json(&q))?;
        requests.write_all(b"\n")?;
        answers.write_all(&contract::to_json(&a))?;
        answers.write_all(b"\n")?;
    }
    requests.flush()?;
    answers.flush()?;
    Ok(())
}
