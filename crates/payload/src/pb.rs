//! Conversion between the logical model and the generated protobuf types.

use crate::model::{FetchRequest, FetchResponse, Point, Record, Shape};
use crate::stream::{PageRequest, PageResponse, StreamItem, StreamRequest};
use crate::validate::PayloadError;

impl From<Shape> for proto::Shape {
    fn from(s: Shape) -> Self {
        match s {
            Shape::Order => proto::Shape::Order,
            Shape::Timeseries => proto::Shape::Timeseries,
        }
    }
}

impl From<proto::Shape> for Shape {
    fn from(s: proto::Shape) -> Self {
        match s {
            proto::Shape::Order => Shape::Order,
            proto::Shape::Timeseries => Shape::Timeseries,
        }
    }
}

impl From<FetchRequest> for proto::FetchRequest {
    fn from(r: FetchRequest) -> Self {
        proto::FetchRequest {
            request_id: r.request_id,
            items: r.items,
            body: r.body,
            shape: proto::Shape::from(r.shape).into(),
        }
    }
}

/// A shape number this contract does not define is an invalid request.
impl TryFrom<proto::FetchRequest> for FetchRequest {
    type Error = PayloadError;

    fn try_from(r: proto::FetchRequest) -> Result<Self, Self::Error> {
        let shape = proto::Shape::try_from(r.shape).map_err(|_| PayloadError::InvalidField("shape"))?;
        Ok(FetchRequest { request_id: r.request_id, items: r.items, body: r.body, shape: shape.into() })
    }
}

impl From<Point> for proto::Point {
    fn from(p: Point) -> Self {
        proto::Point {
            series_id: p.series_id,
            timestamp_ms: p.timestamp_ms,
            value: p.value,
            min: p.min,
            max: p.max,
            sum: p.sum,
            count: p.count,
        }
    }
}

impl From<proto::Point> for Point {
    fn from(p: proto::Point) -> Self {
        Point {
            series_id: p.series_id,
            timestamp_ms: p.timestamp_ms,
            value: p.value,
            min: p.min,
            max: p.max,
            sum: p.sum,
            count: p.count,
        }
    }
}

impl From<Record> for proto::Record {
    fn from(r: Record) -> Self {
        proto::Record {
            id: r.id,
            sku: r.sku,
            name: r.name,
            email: r.email,
            price_cents: r.price_cents,
            currency: r.currency,
            quantity: r.quantity,
            tags: r.tags,
            created_at: Some(prost_types::Timestamp {
                seconds: r.created_at_ms.div_euclid(1000),
                // rem_euclid(1000) is in 0..1000, so the product fits an i32.
                nanos: (r.created_at_ms.rem_euclid(1000) * 1_000_000) as i32,
            }),
            active: r.active,
        }
    }
}

impl TryFrom<proto::Record> for Record {
    type Error = PayloadError;

    fn try_from(r: proto::Record) -> Result<Self, Self::Error> {
        let ts = r.created_at.ok_or(PayloadError::MissingField("created_at"))?;
        if !(0..1_000_000_000).contains(&ts.nanos) {
            return Err(PayloadError::InvalidField("created_at.nanos"));
        }
        let created_at_ms = ts
            .seconds
            .checked_mul(1000)
            .and_then(|ms| ms.checked_add(i64::from(ts.nanos / 1_000_000)))
            .ok_or(PayloadError::InvalidField("created_at.seconds"))?;
        Ok(Record {
            id: r.id,
            sku: r.sku,
            name: r.name,
            email: r.email,
            price_cents: r.price_cents,
            currency: r.currency,
            quantity: r.quantity,
            tags: r.tags,
            created_at_ms,
            active: r.active,
        })
    }
}

impl From<FetchResponse> for proto::FetchResponse {
    fn from(r: FetchResponse) -> Self {
        proto::FetchResponse {
            request_id: r.request_id,
            records: r.records.into_iter().map(Into::into).collect(),
            points: r.points.into_iter().map(Into::into).collect(),
        }
    }
}

impl TryFrom<proto::FetchResponse> for FetchResponse {
    type Error = PayloadError;

    fn try_from(r: proto::FetchResponse) -> Result<Self, Self::Error> {
        Ok(FetchResponse {
            request_id: r.request_id,
            records: r.records.into_iter().map(Record::try_from).collect::<Result<_, _>>()?,
            points: r.points.into_iter().map(Point::from).collect(),
        })
    }
}

impl From<StreamRequest> for proto::StreamRequest {
    fn from(r: StreamRequest) -> Self {
        proto::StreamRequest { request_id: r.request_id, items: r.items, item_bytes: r.item_bytes }
    }
}

impl From<proto::StreamRequest> for StreamRequest {
    fn from(r: proto::StreamRequest) -> Self {
        StreamRequest { request_id: r.request_id, items: r.items, item_bytes: r.item_bytes }
    }
}

impl From<StreamItem> for proto::StreamItem {
    fn from(i: StreamItem) -> Self {
        proto::StreamItem {
            index: i.index,
            produced_unix_nanos: i.produced_unix_nanos,
            due_unix_nanos: i.due_unix_nanos,
            record: Some(i.record.into()),
            filler: i.filler,
        }
    }
}

impl TryFrom<proto::StreamItem> for StreamItem {
    type Error = PayloadError;

    fn try_from(i: proto::StreamItem) -> Result<Self, Self::Error> {
        let record = i.record.ok_or(PayloadError::MissingField("record"))?.try_into()?;
        Ok(StreamItem {
            index: i.index,
            due_unix_nanos: i.due_unix_nanos,
            produced_unix_nanos: i.produced_unix_nanos,
            record,
            filler: i.filler,
        })
    }
}

impl From<PageRequest> for proto::PageRequest {
    fn from(r: PageRequest) -> Self {
        proto::PageRequest { stream: Some(r.stream.into()), page_size: r.page_size, page_token: r.page_token }
    }
}

impl TryFrom<proto::PageRequest> for PageRequest {
    type Error = PayloadError;

    fn try_from(r: proto::PageRequest) -> Result<Self, Self::Error> {
        let stream = r.stream.ok_or(PayloadError::MissingField("stream"))?.into();
        Ok(PageRequest { stream, page_size: r.page_size, page_token: r.page_token })
    }
}

impl From<PageResponse> for proto::PageResponse {
    fn from(r: PageResponse) -> Self {
        proto::PageResponse { items: r.items.into_iter().map(Into::into).collect(), next_page_token: r.next_page_token }
    }
}

impl TryFrom<proto::PageResponse> for PageResponse {
    type Error = PayloadError;

    fn try_from(r: proto::PageResponse) -> Result<Self, Self::Error> {
        Ok(PageResponse {
            items: r.items.into_iter().map(StreamItem::try_from).collect::<Result<_, _>>()?,
            next_page_token: r.next_page_token,
        })
    }
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;
    use crate::{generate, respond};

    #[test]
    fn round_trips_through_protobuf_bytes() {
        for shape in Shape::ALL {
            let req = FetchRequest { request_id: "rt-1".into(), items: 25, body: vec![1, 2, 3], shape };
            let resp = respond(&req);
            let bytes = proto::FetchResponse::from(resp.clone()).encode_to_vec();
            let back = FetchResponse::try_from(proto::FetchResponse::decode(&bytes[..]).unwrap()).unwrap();
            assert_eq!(back, resp);

            let req_bytes = proto::FetchRequest::from(req.clone()).encode_to_vec();
            let req_back = FetchRequest::try_from(proto::FetchRequest::decode(&req_bytes[..]).unwrap()).unwrap();
            assert_eq!(req_back, req);
        }
    }

    #[test]
    fn a_page_of_items_round_trips_through_protobuf_bytes() {
        let stream = StreamRequest { request_id: "s-9".into(), items: 5, item_bytes: 16 };
        let items = (0..3)
            .map(|i| StreamItem::new(&stream, i, 1_733_000_000_000_000_000, 1_733_000_000_000_000_000 + i64::from(i)))
            .collect();
        let page = PageResponse { items, next_page_token: "1733000000000000000.3".into() };
        let bytes = proto::PageResponse::from(page.clone()).encode_to_vec();
        let back = PageResponse::try_from(proto::PageResponse::decode(bytes.as_slice()).unwrap()).unwrap();
        assert_eq!(back, page);
        let request = PageRequest { stream, page_size: 3, page_token: String::new() };
        assert_eq!(PageRequest::try_from(proto::PageRequest::from(request.clone())), Ok(request));
        let no_record = proto::StreamItem { index: 0, ..Default::default() };
        assert_eq!(StreamItem::try_from(no_record), Err(PayloadError::MissingField("record")));
    }

    #[test]
    fn an_unknown_shape_is_an_invalid_field() {
        let pb = proto::FetchRequest { request_id: "s".into(), items: 1, shape: 7, ..Default::default() };
        assert_eq!(FetchRequest::try_from(pb), Err(PayloadError::InvalidField("shape")));
    }

    #[test]
    fn missing_timestamp_is_an_error() {
        let mut pb = proto::Record::from(
            generate(&FetchRequest { request_id: "m".into(), items: 1, ..FetchRequest::default() })[0].clone(),
        );
        pb.created_at = None;
        assert_eq!(Record::try_from(pb), Err(PayloadError::MissingField("created_at")));
    }
}
