//! The TPC-C tables (clause 1.3) and the CH-benCHmark's extra tables, with BenchBase's table
//! names (`oorder` for ORDER, a reserved word), as DDL for each system.
//!
//! No FOREIGN KEY or CHECK constraints: Freshet refuses them and the benchmark does not rely
//! on them. Indexes: the primary keys, plus the ordered indexes the transactions search by
//! (customer by last name, a customer's newest order). Freshet's primary key is a hash index
//! that answers whole keys only, so on Freshet the key prefixes the transactions scan
//! (new orders of a district, lines of an order) get ordered indexes of their own; PostgreSQL's
//! B-tree primary keys answer those already. DuckDB only runs the analytical queries and gets
//! neither keys nor indexes.

/// Which system the DDL is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    Freshet,
    Postgres,
    DuckDb,
}

/// The tables in load order.
pub const TABLES: [&str; 12] =
    ["warehouse", "district", "customer", "history", "new_order", "oorder", "order_line", "item", "stock", "region", "nation", "supplier"];

const DEFS: [(&str, &str, &str); 12] = [
    (
        "warehouse",
        "w_id INT NOT NULL, w_ytd NUMERIC(12,2) NOT NULL, w_tax NUMERIC(4,4) NOT NULL, w_name VARCHAR(10) NOT NULL, \
         w_street_1 VARCHAR(20) NOT NULL, w_street_2 VARCHAR(20) NOT NULL, w_city VARCHAR(20) NOT NULL, \
         w_state CHAR(2) NOT NULL, w_zip CHAR(9) NOT NULL",
        "w_id",
    ),
    (
        "district",
        "d_w_id INT NOT NULL, d_id INT NOT NULL, d_ytd NUMERIC(12,2) NOT NULL, d_tax NUMERIC(4,4) NOT NULL, \
         d_next_o_id INT NOT NULL, d_name VARCHAR(10) NOT NULL, d_street_1 VARCHAR(20) NOT NULL, \
         d_street_2 VARCHAR(20) NOT NULL, d_city VARCHAR(20) NOT NULL, d_state CHAR(2) NOT NULL, d_zip CHAR(9) NOT NULL",
        "d_w_id, d_id",
    ),
    (
        "customer",
        "c_w_id INT NOT NULL, c_d_id INT NOT NULL, c_id INT NOT NULL, c_discount NUMERIC(4,4) NOT NULL, \
         c_credit CHAR(2) NOT NULL, c_last VARCHAR(16) NOT NULL, c_first VARCHAR(16) NOT NULL, \
         c_credit_lim NUMERIC(12,2) NOT NULL, c_balance NUMERIC(12,2) NOT NULL, c_ytd_payment NUMERIC(12,2) NOT NULL, \
         c_payment_cnt INT NOT NULL, c_delivery_cnt INT NOT NULL, c_street_1 VARCHAR(20) NOT NULL, \
         c_street_2 VARCHAR(20) NOT NULL, c_city VARCHAR(20) NOT NULL, c_state CHAR(2) NOT NULL, c_zip CHAR(9) NOT NULL, \
         c_phone CHAR(16) NOT NULL, c_since TIMESTAMP NOT NULL, c_middle CHAR(2) NOT NULL, c_data VARCHAR(500) NOT NULL",
        "c_w_id, c_d_id, c_id",
    ),
    (
        "history",
        "h_c_id INT NOT NULL, h_c_d_id INT NOT NULL, h_c_w_id INT NOT NULL, h_d_id INT NOT NULL, h_w_id INT NOT NULL, \
         h_date TIMESTAMP NOT NULL, h_amount NUMERIC(6,2) NOT NULL, h_data VARCHAR(24) NOT NULL",
        "",
    ),
    ("new_order", "no_w_id INT NOT NULL, no_d_id INT NOT NULL, no_o_id INT NOT NULL", "no_w_id, no_d_id, no_o_id"),
    (
        "oorder",
        "o_w_id INT NOT NULL, o_d_id INT NOT NULL, o_id INT NOT NULL, o_c_id INT NOT NULL, o_carrier_id INT, \
         o_ol_cnt INT NOT NULL, o_all_local INT NOT NULL, o_entry_d TIMESTAMP NOT NULL",
        "o_w_id, o_d_id, o_id",
    ),
    (
        "order_line",
        "ol_w_id INT NOT NULL, ol_d_id INT NOT NULL, ol_o_id INT NOT NULL, ol_number INT NOT NULL, ol_i_id INT NOT NULL, \
         ol_delivery_d TIMESTAMP, ol_amount NUMERIC(6,2) NOT NULL, ol_supply_w_id INT NOT NULL, \
         ol_quantity INT NOT NULL, ol_dist_info CHAR(24) NOT NULL",
        "ol_w_id, ol_d_id, ol_o_id, ol_number",
    ),
    (
        "item",
        "i_id INT NOT NULL, i_name VARCHAR(24) NOT NULL, i_price NUMERIC(5,2) NOT NULL, i_data VARCHAR(50) NOT NULL, \
         i_im_id INT NOT NULL",
        "i_id",
    ),
    (
        "stock",
        "s_w_id INT NOT NULL, s_i_id INT NOT NULL, s_quantity INT NOT NULL, s_ytd INT NOT NULL, s_order_cnt INT NOT NULL, \
         s_remote_cnt INT NOT NULL, s_data VARCHAR(50) NOT NULL, s_dist_01 CHAR(24) NOT NULL, s_dist_02 CHAR(24) NOT NULL, \
         s_dist_03 CHAR(24) NOT NULL, s_dist_04 CHAR(24) NOT NULL, s_dist_05 CHAR(24) NOT NULL, s_dist_06 CHAR(24) NOT NULL, \
         s_dist_07 CHAR(24) NOT NULL, s_dist_08 CHAR(24) NOT NULL, s_dist_09 CHAR(24) NOT NULL, s_dist_10 CHAR(24) NOT NULL",
        "s_w_id, s_i_id",
    ),
    ("region", "r_regionkey INT NOT NULL, r_name CHAR(55) NOT NULL, r_comment CHAR(152) NOT NULL", "r_regionkey"),
    (
        "nation",
        "n_nationkey INT NOT NULL, n_name CHAR(25) NOT NULL, n_regionkey INT NOT NULL, n_comment CHAR(152) NOT NULL",
        "n_nationkey",
    ),
    (
        "supplier",
        "su_suppkey INT NOT NULL, su_name CHAR(25) NOT NULL, su_address VARCHAR(40) NOT NULL, su_nationkey INT NOT NULL, \
         su_phone CHAR(15) NOT NULL, su_acctbal NUMERIC(12,2) NOT NULL, su_comment CHAR(101) NOT NULL",
        "su_suppkey",
    ),
];

/// Ordered indexes every system with indexes gets: (name, table, columns).
const INDEXES: [(&str, &str, &str); 2] = [
    ("customer_by_name", "customer", "c_w_id, c_d_id, c_last, c_first"),
    ("oorder_by_customer", "oorder", "o_w_id, o_d_id, o_c_id, o_id"),
];

/// The warehouse column that partitions a table when Freshet runs with several partitions
/// (HyPer §4.3: TPC-C partitioned by warehouse); `None` for the tables every partition keeps
/// a replica of (item and the CH tables, which no transaction writes).
pub fn partition_column(table: &str) -> Option<&'static str> {
    Some(match table {
        "warehouse" => "w_id",
        "district" => "d_w_id",
        "customer" => "c_w_id",
        "history" => "h_w_id",
        "new_order" => "no_w_id",
        "oorder" => "o_w_id",
        "order_line" => "ol_w_id",
        "stock" => "s_w_id",
        _ => return None,
    })
}

/// CREATE TABLE statements, then CREATE INDEX statements; `partitioned` (Freshet only) adds
/// `PARTITION BY HASH` on each table's warehouse column ([`partition_column`]).
pub fn ddl(flavor: Flavor, partitioned: bool) -> Vec<String> {
    let mut out = Vec::new();
    for (name, columns, key) in DEFS {
        let mut sql = if flavor == Flavor::DuckDb || key.is_empty() {
            format!("CREATE TABLE {name} ({columns})")
        } else {
            format!("CREATE TABLE {name} ({columns}, PRIMARY KEY ({key}))")
        };
        if let (true, Flavor::Freshet, Some(column)) = (partitioned, flavor, partition_column(name)) {
            sql.push_str(&format!(" PARTITION BY HASH ({column})"));
        }
        out.push(sql);
    }
    // Prefixes of the composite primary keys (new orders of a district, lines of an order)
    // are answered by the primary key itself, in Freshet as in PostgreSQL.
    let indexes: &[(&str, &str, &str)] = match flavor {
        Flavor::Freshet | Flavor::Postgres => &INDEXES,
        Flavor::DuckDb => &[],
    };
    for (name, table, columns) in indexes {
        out.push(format!("CREATE INDEX {name} ON {table} ({columns})"));
    }
    out
}
