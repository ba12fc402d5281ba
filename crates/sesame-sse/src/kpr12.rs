//! KPR12: dynamic SSE of Kamara, Papamanthou and Roeder (CCS 2012) with a
//! Merkle tree over the index for verification. (Being written.)
