package store

import "context"

// RawStrings reads one text column as stored, sealed or not: what a copy
// of the database shows.
func RawStrings(ctx context.Context, s *DB, query string) ([]string, error) {
	rows, err := s.query(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
