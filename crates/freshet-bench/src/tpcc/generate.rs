//! The initial database of TPC-C (clause 4.3.3.1) and the CH-benCHmark's extra tables, as CSV
//! text ready for `COPY … FROM STDIN (FORMAT csv)` or for DuckDB's `read_csv`.
//!
//! Every table of one warehouse is generated from streams of its own (seed, warehouse, table),
//! so warehouses can be generated in any order, in parallel, and still give the same bytes.
//! Dates are one fixed load time ([`LOAD_TIME`]) rather than the clock, so that the same seed
//! gives the same database in every system, including its answers to the CH queries.
//!
//! Generated strings hold only letters, digits and blanks: no CSV quoting is needed; NULL is
//! the empty field.

use std::fmt::Write;

use super::random::{last_name, NurandConstants, Rng};

/// 2015-06-01 00:00:00 in microseconds since 1970: the timestamp of every loaded row. It lies
/// inside the date ranges the CH queries filter on (2007-01-02 to 2020-01-01), so that their
/// answers on a freshly loaded database are not empty.
pub const LOAD_TIME: i64 = 1_433_116_800_000_000;
const LOAD_TIME_TEXT: &str = "2015-06-01 00:00:00";

pub const DISTRICTS_PER_WAREHOUSE: i64 = 10;

/// Cardinalities. [`Scale::SPEC`] is the specification's; smaller scales exist for tests only
/// (they keep 10 districts per warehouse and the proportions: the last 30% of each district's
/// orders are new orders).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scale {
    pub items: i64,
    pub customers_per_district: i64,
    pub orders_per_district: i64,
}

impl Scale {
    pub const SPEC: Scale = Scale { items: 100_000, customers_per_district: 3_000, orders_per_district: 3_000 };
    /// For tests: 1,000 items, 30 customers and 30 orders per district.
    pub const TINY: Scale = Scale { items: 1_000, customers_per_district: 30, orders_per_district: 30 };

    /// The first order id that is still undelivered (2101 at the specification's scale).
    pub fn first_new_order(&self) -> i64 {
        self.orders_per_district * 7 / 10 + 1
    }
}

/// One table's generated rows as CSV.
pub struct TableData {
    pub table: &'static str,
    pub csv: String,
    pub rows: u64,
}

fn dec(out: &mut String, value: i64, scale: u32) {
    let p = 10i64.pow(scale);
    let sign = if value < 0 { "-" } else { "" };
    let v = value.abs();
    let _ = write!(out, "{sign}{}.{:0w$}", v / p, v % p, w = scale as usize);
}

struct Csv {
    data: TableData,
}

impl Csv {
    fn new(table: &'static str) -> Csv {
        Csv { data: TableData { table, csv: String::new(), rows: 0 } }
    }

    /// Appends one row; fields are written by `f` separated with `,` by the caller.
    fn row(&mut self, f: impl FnOnce(&mut String)) {
        f(&mut self.data.csv);
        self.data.csv.push('\n');
        self.data.rows += 1;
    }
}

/// The ITEM table (shared by all warehouses).
pub fn items(seed: u64, scale: Scale) -> TableData {
    let mut r = Rng::stream(seed, 0, "item");
    let mut t = Csv::new("item");
    for i in 1..=scale.items {
        let (im, name, price, data) = (r.uniform(1, 10_000), r.astring(14, 24), r.cents(100, 10_000), r.data_with_original());
        t.row(|o| {
            let _ = write!(o, "{i},{name},");
            dec(o, price, 2);
            let _ = write!(o, ",{data},{im}");
        });
    }
    t.data
}

fn address(r: &mut Rng, o: &mut String) {
    let (s1, s2, city, state, zip) = (r.astring(10, 20), r.astring(10, 20), r.astring(10, 20), r.astring(2, 2), r.zip());
    let _ = write!(o, "{s1},{s2},{city},{state},{zip}");
}

/// WAREHOUSE, DISTRICT, STOCK, CUSTOMER, HISTORY, ORDER, NEW-ORDER and ORDER-LINE rows of
/// warehouse `w`.
pub fn warehouse(seed: u64, w: i64, scale: Scale) -> Vec<TableData> {
    let consts = NurandConstants::for_load(seed);
    let ws = w as u64;
    let mut out = Vec::with_capacity(8);

    let mut r = Rng::stream(seed, ws, "warehouse");
    let mut t = Csv::new("warehouse");
    t.row(|o| {
        let tax = r.uniform(0, 2000);
        let _ = write!(o, "{w},300000.00,");
        dec(o, tax, 4);
        let _ = write!(o, ",{},", r.astring(6, 10));
        address(&mut r, o);
    });
    out.push(t.data);

    let mut r = Rng::stream(seed, ws, "district");
    let mut t = Csv::new("district");
    for d in 1..=DISTRICTS_PER_WAREHOUSE {
        t.row(|o| {
            let tax = r.uniform(0, 2000);
            let _ = write!(o, "{w},{d},30000.00,");
            dec(o, tax, 4);
            let _ = write!(o, ",{},{},", scale.orders_per_district + 1, r.astring(6, 10));
            address(&mut r, o);
        });
    }
    out.push(t.data);

    out.push(stock(seed, w, scale));
    let (customers, history) = customers(seed, w, scale, consts);
    out.push(customers);
    out.push(history);
    out.extend(orders(seed, w, scale));
    out
}

fn stock(seed: u64, w: i64, scale: Scale) -> TableData {
    let mut r = Rng::stream(seed, w as u64, "stock");
    let mut t = Csv::new("stock");
    for i in 1..=scale.items {
        t.row(|o| {
            let q = r.uniform(10, 100);
            let data = r.data_with_original();
            let _ = write!(o, "{w},{i},{q},0,0,0,{data}");
            for _ in 0..10 {
                let _ = write!(o, ",{}", r.astring(24, 24));
            }
        });
    }
    t.data
}

fn customers(seed: u64, w: i64, scale: Scale, consts: NurandConstants) -> (TableData, TableData) {
    let mut r = Rng::stream(seed, w as u64, "customer");
    let mut c = Csv::new("customer");
    let mut h = Csv::new("history");
    for d in 1..=DISTRICTS_PER_WAREHOUSE {
        for id in 1..=scale.customers_per_district {
            let last = if id <= 1000 { last_name(id - 1) } else { last_name(r.nurand(255, 0, 999, consts.c_last)) };
            c.row(|o| {
                let credit = if r.uniform(1, 10) == 1 { "BC" } else { "GC" };
                let discount = r.uniform(0, 5000);
                let first = r.astring(8, 16);
                let _ = write!(o, "{w},{d},{id},");
                dec(o, discount, 4);
                let _ = write!(o, ",{credit},{last},{first},50000.00,-10.00,10.00,1,0,");
                address(&mut r, o);
                let (phone, data) = (r.nstring(16, 16), r.astring(300, 500));
                let _ = write!(o, ",{phone},{LOAD_TIME_TEXT},OE,{data}");
            });
            h.row(|o| {
                let _ = write!(o, "{id},{d},{w},{d},{w},{LOAD_TIME_TEXT},10.00,{}", r.astring(12, 24));
            });
        }
    }
    (c.data, h.data)
}

fn orders(seed: u64, w: i64, scale: Scale) -> [TableData; 3] {
    let mut r = Rng::stream(seed, w as u64, "orders");
    let mut orders = Csv::new("oorder");
    let mut new_orders = Csv::new("new_order");
    let mut lines = Csv::new("order_line");
    let first_new = scale.first_new_order();
    for d in 1..=DISTRICTS_PER_WAREHOUSE {
        // o_c_id: a random permutation of the customer ids.
        let mut customers: Vec<i64> = (1..=scale.customers_per_district).collect();
        for i in (1..customers.len()).rev() {
            let j = r.uniform(0, i as i64) as usize;
            customers.swap(i, j);
        }
        for o_id in 1..=scale.orders_per_district {
            let delivered = o_id < first_new;
            let c_id = customers[((o_id - 1) % scale.customers_per_district) as usize];
            let ol_cnt = r.uniform(5, 15);
            orders.row(|o| {
                let _ = write!(o, "{w},{d},{o_id},{c_id},");
                if delivered {
                    let _ = write!(o, "{}", r.uniform(1, 10));
                }
                let _ = write!(o, ",{ol_cnt},1,{LOAD_TIME_TEXT}");
            });
            if !delivered {
                new_orders.row(|o| {
                    let _ = write!(o, "{w},{d},{o_id}");
                });
            }
            for n in 1..=ol_cnt {
                lines.row(|o| {
                    let item = r.uniform(1, scale.items);
                    let _ = write!(o, "{w},{d},{o_id},{n},{item},");
                    if delivered {
                        o.push_str(LOAD_TIME_TEXT);
                        o.push_str(",0.00");
                    } else {
                        o.push(',');
                        dec(o, r.uniform(1, 999_999), 2);
                    }
                    let _ = write!(o, ",{w},5,{}", r.astring(24, 24));
                });
            }
        }
    }
    [orders.data, new_orders.data, lines.data]
}

/// The CH-benCHmark's nations: key (the ASCII code of a character `c_state` may start with),
/// name, region key.
pub const NATIONS: [(i64, &str, i64); 62] = [
    (48, "Australia", 4), (49, "Belgium", 5), (50, "Cameroon", 1), (51, "Denmark", 5), (52, "Ecuador", 2),
    (53, "France", 5), (54, "Germany", 5), (55, "Hungary", 5), (56, "Italy", 5), (57, "Japan", 3),
    (65, "Kenya", 1), (66, "Lithuania", 5), (67, "Mexico", 2), (68, "Netherlands", 5), (69, "Oman", 1),
    (70, "Portugal", 5), (71, "Qatar", 1), (72, "Rwanda", 1), (73, "Serbia", 5), (74, "Togo", 1),
    (75, "United States", 2), (76, "Vietnam", 3), (77, "Singapore", 3), (78, "Cambodia", 3), (79, "Yemen", 1),
    (80, "Zimbabwe", 1), (81, "Argentina", 2), (82, "Bolivia", 2), (83, "Canada", 2), (84, "Dominican Republic", 2),
    (85, "Egypt", 1), (86, "Finnland", 5), (87, "Ghana", 1), (88, "Haiti", 2), (89, "India", 3),
    (90, "Jamaica", 4), (97, "Kazakhstan", 3), (98, "Luxembourg", 5), (99, "Morocco", 1), (100, "Norway", 5),
    (101, "Poland", 5), (102, "Peru", 2), (103, "Nicaragua", 2), (104, "Romania", 5), (105, "South Africa", 1),
    (106, "Thailand", 3), (107, "United Kingdom", 5), (108, "Venezuela", 2), (109, "Liechtenstein", 5), (110, "Austria", 5),
    (111, "Laos", 3), (112, "Zambia", 1), (113, "Switzerland", 5), (114, "China", 3), (115, "Papua New Guinea", 4),
    (116, "East Timor", 4), (117, "Bulgaria", 5), (118, "Brazil", 2), (119, "Albania", 5), (120, "Andorra", 5),
    (121, "Belize", 2), (122, "Botswana", 1),
];

pub const REGIONS: [(i64, &str); 5] = [(1, "Africa"), (2, "America"), (3, "Asia"), (4, "Australia"), (5, "Europe")];

/// REGION (5 rows), NATION (62) and SUPPLIER (10,000, keys 0..9999 so that every value of
/// `mod(s_w_id * s_i_id, 10000)` names one), as the CH-benCHmark defines them.
pub fn ch_tables(seed: u64) -> Vec<TableData> {
    let mut r = Rng::stream(seed, 0, "ch");
    let mut region = Csv::new("region");
    for (key, name) in REGIONS {
        region.row(|o| {
            let _ = write!(o, "{key},{name},{}", r.astring(31, 115));
        });
    }
    let mut nation = Csv::new("nation");
    for (key, name, region) in NATIONS {
        nation.row(|o| {
            let _ = write!(o, "{key},{name},{region},{}", r.astring(31, 114));
        });
    }
    let mut supplier = Csv::new("supplier");
    for key in 0..10_000i64 {
        supplier.row(|o| {
            let nation = NATIONS[r.uniform(0, 61) as usize].0;
            let (address, phone) = (r.astring(20, 40), r.nstring(15, 15));
            let _ = write!(o, "{key},Supplier#{key:09},{address},{nation},{phone},");
            dec(o, r.uniform(-99_999, 999_999), 2);
            // A few suppliers carry "bad" in their comment (Q16 filters them).
            let mut comment = r.astring(51, 101);
            if r.uniform(1, 100) <= 5 {
                let at = r.uniform(0, comment.len() as i64 - 3) as usize;
                comment.replace_range(at..at + 3, "bad");
            }
            o.push(',');
            o.push_str(&comment);
        });
    }
    vec![region.data, nation.data, supplier.data]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_is_deterministic_per_warehouse() {
        let a = warehouse(3, 2, Scale::TINY);
        let b = warehouse(3, 2, Scale::TINY);
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x.csv, y.csv, "{}", x.table);
        }
        assert_ne!(warehouse(3, 1, Scale::TINY)[2].csv, a[2].csv);
    }

    #[test]
    fn cardinalities_follow_the_scale() {
        let s = Scale::TINY;
        let rows: Vec<(&str, u64)> = warehouse(1, 1, s).iter().map(|t| (t.table, t.rows)).collect();
        assert_eq!(
            rows[..6],
            [("warehouse", 1), ("district", 10), ("stock", 1000), ("customer", 300), ("history", 300), ("oorder", 300)]
        );
        assert_eq!(rows[6], ("new_order", 90));
        let mut out = String::new();
        dec(&mut out, -1005, 2);
        assert_eq!(out, "-10.05");
    }

    #[test]
    fn about_ten_percent_of_items_are_original() {
        let items = items(9, Scale { items: 10_000, ..Scale::TINY });
        let n = items.csv.lines().filter(|l| l.contains("ORIGINAL")).count();
        assert!((800..1200).contains(&n), "{n}");
    }
}
