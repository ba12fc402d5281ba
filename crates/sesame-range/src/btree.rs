//! A B+ tree with deletion over an abstract node store. (Being written.)
