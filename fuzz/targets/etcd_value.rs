//! libFuzzer target: any bytes as an etcd value (a SkyDNS record's JSON),
//! parsed, stored and answered (see `skydns_fuzz`).
#![no_main]
#![allow(unsafe_code)]

/// libFuzzer's entry point.
///
/// # Safety
/// libFuzzer passes `size` readable bytes at `data`.
#[no_mangle]
pub unsafe extern "C" fn LLVMFuzzerTestOneInput(data: *const u8, size: usize) -> i32 {
    let input = if size == 0 {
        &[][..]
    } else {
        // SAFETY: libFuzzer guarantees `size` readable bytes at `data`.
        unsafe { std::slice::from_raw_parts(data, size) }
    };
    skydns_fuzz::etcd_value(input);
    0
}
