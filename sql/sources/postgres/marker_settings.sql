-- Before the change markers: the text forms they hash fixed, whatever the server's or the user's
-- defaults (time zone, date style, bytea and float output), so that one copy has one set of markers.
SELECT set_config('TimeZone', 'UTC', false) AS time_zone, set_config('DateStyle', 'ISO, YMD', false) AS date_style,
       set_config('IntervalStyle', 'postgres', false) AS interval_style,
       set_config('bytea_output', 'hex', false) AS bytea_output, set_config('extra_float_digits', '1', false) AS float_digits
