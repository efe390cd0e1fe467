-- The shared vault's roles on PostgreSQL: one that owns the schema and migrates it, one the KB runs as
-- with row access only (docs/operations.md "A least-privilege role"). Run it once, connected to the
-- vault's database as a superuser (on a managed service, its administrator role):
--
--   psql "host=db.example.internal dbname=gateway user=postgres sslmode=verify-full" \
--        -v ON_ERROR_STOP=1 -f deploy/postgres/roles.sql
--
-- then give both roles a password (\password gateway_migrator, \password gateway_kb) and apply the
-- schema as the owner: `gateway vault migrate --dsn-file <a file holding gateway_migrator's DSN>`.
-- Running it again changes nothing.

DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'gateway_migrator') THEN
        CREATE ROLE gateway_migrator LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'gateway_kb') THEN
        CREATE ROLE gateway_kb LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS NOINHERIT;
    END IF;
    -- Only these two (and superusers) may connect; nobody may create schemas in the database.
    EXECUTE format('REVOKE ALL ON DATABASE %I FROM PUBLIC', current_database());
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO gateway_migrator, gateway_kb', current_database());
END
$$;

-- Nothing is created in public by anyone but its owner (PostgreSQL 15 and later do this already).
REVOKE CREATE ON SCHEMA public FROM PUBLIC;

-- The trigram index's operator classes: adding an extension needs CREATE on the database, which
-- neither role has. The migrations find it and go on.
CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public;

-- The schema, owned by the migrating role: its tables (made by `gateway vault migrate`) are its own.
CREATE SCHEMA IF NOT EXISTS gateway_vault AUTHORIZATION gateway_migrator;
ALTER SCHEMA gateway_vault OWNER TO gateway_migrator;
REVOKE ALL ON SCHEMA gateway_vault FROM PUBLIC;

-- The KB: find the schema's objects, and read and write rows. No CREATE, no DDL, no TRUNCATE.
GRANT USAGE ON SCHEMA gateway_vault TO gateway_kb;
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA gateway_vault TO gateway_kb;
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA gateway_vault TO gateway_kb;
-- ... and the same on every table and sequence a later migration adds.
ALTER DEFAULT PRIVILEGES FOR ROLE gateway_migrator IN SCHEMA gateway_vault
    GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO gateway_kb;
ALTER DEFAULT PRIVILEGES FOR ROLE gateway_migrator IN SCHEMA gateway_vault
    GRANT USAGE, SELECT ON SEQUENCES TO gateway_kb;
