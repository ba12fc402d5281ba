//! What the packed-layout tests share.

/// A FAST-like key: `e` and 32 bytes that look random (splitmix64 of `i`).
pub(crate) fn label(i: u32) -> Vec<u8> {
    let mut k = vec![b'e'];
    let mut x = u64::from(i);
    for _ in 0..4 {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        k.extend_from_slice(&(z ^ (z >> 31)).to_be_bytes());
    }
    k
}
