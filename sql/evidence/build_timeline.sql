-- The whole loaded build timeline, as `builds check` takes it (every host, every entry).
SELECT host, build, valid_from FROM host_builds ORDER BY host, valid_from
