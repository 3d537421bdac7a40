import java.sql.*;

/** Times one server through the Hive JDBC driver: N `SELECT 1` round trips, then the wide query
 *  fetched with the given fetch size; prints "trivial <s>" lines, then "first <s>" and "total <s>". */
public class JdbcFetch {
    public static void main(String[] args) throws Exception {
        String url = args[0], wide = args[1];
        int trivial = Integer.parseInt(args[2]), batch = Integer.parseInt(args[3]);
        long rows = Long.parseLong(args[4]);
        try (Connection connection = DriverManager.getConnection(url, "bench", "");
             Statement statement = connection.createStatement()) {
            statement.setFetchSize(batch);
            for (int i = 0; i < trivial; i++) {
                long start = System.nanoTime();
                try (ResultSet rs = statement.executeQuery("SELECT 1")) {
                    rs.next();
                    if (rs.getInt(1) != 1) throw new IllegalStateException("SELECT 1");
                }
                System.out.println("trivial " + (System.nanoTime() - start) / 1e9);
            }
            long start = System.nanoTime();
            long count = 0, sum = 0;
            String last = null;
            try (ResultSet rs = statement.executeQuery(wide)) {
                while (rs.next()) {
                    if (count == 0) System.out.println("first " + (System.nanoTime() - start) / 1e9);
                    sum += rs.getLong(1) + rs.getLong(2);
                    last = rs.getString(3);
                    count++;
                }
            }
            System.out.println("total " + (System.nanoTime() - start) / 1e9);
            if (count != rows || !String.valueOf(rows - 1).equals(last) || sum != 3 * rows * (rows - 1) / 2)
                throw new IllegalStateException("wrong rows: " + count + " " + last + " " + sum);
        }
    }
}
