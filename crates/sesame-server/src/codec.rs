//! The protobuf codec of the service: `tonic_prost`'s, except that a
//! request that does not decode is `INVALID_ARGUMENT` (the client's
//! mistake), not `INTERNAL`.

use std::marker::PhantomData;

use prost::Message;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::Status;

/// Encodes `E`, decodes `D`.
#[derive(Debug)]
pub struct ProtoCodec<E, D>(PhantomData<fn(E) -> D>);

impl<E, D> Default for ProtoCodec<E, D> {
    fn default() -> Self {
        ProtoCodec(PhantomData)
    }
}

/// Encoder of [`ProtoCodec`].
#[derive(Debug)]
pub struct ProtoEncoder<E>(PhantomData<fn(E)>);

/// Decoder of [`ProtoCodec`].
#[derive(Debug)]
pub struct ProtoDecoder<D>(PhantomData<fn() -> D>);

impl<E: Message> Encoder for ProtoEncoder<E> {
    type Item = E;
    type Error = Status;
    fn encode(&mut self, item: E, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        item.encode(dst)
            .map_err(|e| Status::internal(format!("cannot encode the response: {e}")))
    }
}

impl<D: Message + Default> Decoder for ProtoDecoder<D> {
    type Item = D;
    type Error = Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<D>, Status> {
        D::decode(src)
            .map(Some)
            .map_err(|e| Status::invalid_argument(format!("malformed request: {e}")))
    }
}

impl<E, D> Codec for ProtoCodec<E, D>
where
    E: Message + Send + 'static,
    D: Message + Default + Send + 'static,
{
    type Encode = E;
    type Decode = D;
    type Encoder = ProtoEncoder<E>;
    type Decoder = ProtoDecoder<D>;
    fn encoder(&mut self) -> ProtoEncoder<E> {
        ProtoEncoder(PhantomData)
    }
    fn decoder(&mut self) -> ProtoDecoder<D> {
        ProtoDecoder(PhantomData)
    }
}
