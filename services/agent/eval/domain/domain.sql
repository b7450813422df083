-- A second demo PostgreSQL database for SS-Tools: a network of veterinary clinics.
-- Superset name: demo_vetclinic (in dev and prod). PostgreSQL database: sstools_vetclinic.
-- Plain PostgreSQL 15. Idempotent: schemas and tables are made only where missing, and each
-- table is seeded only while it is empty, so running this file twice changes nothing.
-- Every row is computed from generate_series with modular arithmetic (or written out), so the
-- counts per value are fixed and documented in domain.md.

BEGIN;

CREATE SCHEMA IF NOT EXISTS clinic;
CREATE SCHEMA IF NOT EXISTS lab;

-- public.pets: the animals the clinics treat (300 rows).
CREATE TABLE IF NOT EXISTS public.pets (
    pet_id      int PRIMARY KEY,
    nickname    text NOT NULL,
    species     text NOT NULL,          -- dog, cat, rabbit, parrot
    birth_date  date NOT NULL,
    weight_kg   numeric(5, 1) NOT NULL,
    owner_city  text NOT NULL,          -- Москва, Казань, Самара, Томск
    neutered    boolean NOT NULL
);

INSERT INTO public.pets (pet_id, nickname, species, birth_date, weight_kg, owner_city, neutered)
SELECT n,
       (ARRAY['Rex', 'Murka', 'Bars', 'Luna', 'Tishka', 'Kesha', 'Bella'])[n % 7 + 1] || '-' || lpad(n::text, 3, '0'),
       CASE WHEN n % 20 < 11 THEN 'dog'
            WHEN n % 20 < 17 THEN 'cat'
            WHEN n % 20 < 19 THEN 'rabbit'
            ELSE 'parrot' END,
       date '2012-01-01' + (n * 37 % 4000),
       round((0.3 + (n * 13 % 400) / 10.0)::numeric, 1),
       CASE WHEN n <= 150 THEN 'Москва'
            WHEN n <= 230 THEN 'Казань'
            WHEN n <= 275 THEN 'Самара'
            ELSE 'Томск' END,
       n % 3 <> 0
FROM generate_series(1, 300) AS n
WHERE NOT EXISTS (SELECT 1 FROM public.pets);

-- clinic.vets: the veterinarians (12 rows, written out).
CREATE TABLE IF NOT EXISTS clinic.vets (
    vet_id            int PRIMARY KEY,
    full_name         text NOT NULL,
    specialty         text NOT NULL,    -- therapy, surgery, dentistry, dermatology, cardiology
    branch            text NOT NULL,    -- Центральный, Заречный, Лесной
    hired_on          date NOT NULL,
    years_experience  int NOT NULL
);

INSERT INTO clinic.vets (vet_id, full_name, specialty, branch, hired_on, years_experience)
SELECT * FROM (VALUES
    (1,  'Irina Sokolova',    'therapy',     'Центральный', date '2016-03-14', 14),
    (2,  'Pavel Orlov',       'surgery',     'Центральный', date '2014-09-01', 19),
    (3,  'Marina Belova',     'therapy',     'Заречный',    date '2019-02-11',  8),
    (4,  'Denis Kuznetsov',   'dentistry',   'Центральный', date '2020-06-22',  6),
    (5,  'Olesya Grigorieva', 'therapy',     'Лесной',      date '2021-01-18',  4),
    (6,  'Artem Volkov',      'surgery',     'Заречный',    date '2017-10-02', 12),
    (7,  'Ksenia Lebedeva',   'dermatology', 'Центральный', date '2018-04-09',  9),
    (8,  'Nikita Fedorov',    'therapy',     'Заречный',    date '2022-08-15',  3),
    (9,  'Elena Morozova',    'cardiology',  'Центральный', date '2015-11-30', 17),
    (10, 'Roman Zaitsev',     'dentistry',   'Лесной',      date '2023-02-06',  2),
    (11, 'Sofia Pavlova',     'therapy',     'Центральный', date '2020-01-13',  7),
    (12, 'Gleb Nikitin',      'surgery',     'Заречный',    date '2013-05-20', 21)
) AS v(vet_id, full_name, specialty, branch, hired_on, years_experience)
WHERE NOT EXISTS (SELECT 1 FROM clinic.vets);

-- clinic.appointments: visits of pets to vets (1000 rows, 2025-01-01 .. 2026-06-30).
CREATE TABLE IF NOT EXISTS clinic.appointments (
    appointment_id  int PRIMARY KEY,
    pet_id          int NOT NULL,
    vet_id          int NOT NULL,
    visit_date      date NOT NULL,
    visit_reason    text NOT NULL,      -- осмотр, вакцинация, анализы, хирургия, стоматология
    outcome         text NOT NULL,      -- discharged, follow-up, referred, no-show
    fee_rub         numeric(10, 2) NOT NULL,
    duration_min    int NOT NULL,
    is_emergency    boolean NOT NULL
);

INSERT INTO clinic.appointments
    (appointment_id, pet_id, vet_id, visit_date, visit_reason, outcome, fee_rub, duration_min, is_emergency)
SELECT n,
       n * 7 % 300 + 1,
       (ARRAY[2, 7, 11, 6, 9, 2, 10, 5, 3, 1, 9, 2, 8, 4, 6, 1, 9, 2, 7, 11, 6, 9, 2, 12, 5, 3, 1, 9, 2, 10, 4, 3, 1, 9, 2, 8, 11, 6, 1, 2])[n % 40 + 1],
       date '2025-01-01' + (n * 11 % 546),
       CASE WHEN n % 25 < 13 THEN 'осмотр'
            WHEN n % 25 < 19 THEN 'вакцинация'
            WHEN n % 25 < 22 THEN 'анализы'
            WHEN n % 25 < 24 THEN 'хирургия'
            ELSE 'стоматология' END,
       CASE WHEN n % 8 < 6 THEN 'discharged'
            WHEN n % 8 = 6 THEN 'follow-up'
            WHEN n % 16 = 7 THEN 'referred'
            ELSE 'no-show' END,
       (500 + n * 137 % 4501)::numeric(10, 2),
       10 + (n * 7 % 50),
       n % 9 = 0
FROM generate_series(1, 1000) AS n
WHERE NOT EXISTS (SELECT 1 FROM clinic.appointments);

-- clinic.vaccinations: vaccines given (400 rows, 2025-02-01 .. 2026-05-22).
CREATE TABLE IF NOT EXISTS clinic.vaccinations (
    vaccination_id  int PRIMARY KEY,
    pet_id          int NOT NULL,
    vaccine         text NOT NULL,      -- rabies, distemper, leptospirosis
    given_on        date NOT NULL,
    next_due_on     date NOT NULL,
    dose_ml         numeric(3, 1) NOT NULL
);

INSERT INTO clinic.vaccinations (vaccination_id, pet_id, vaccine, given_on, next_due_on, dose_ml)
SELECT n,
       n * 3 % 300 + 1,
       CASE WHEN n % 10 < 6 THEN 'rabies'
            WHEN n % 10 < 9 THEN 'distemper'
            ELSE 'leptospirosis' END,
       date '2025-02-01' + (n * 5 % 480),
       date '2025-02-01' + (n * 5 % 480) + 365,
       (ARRAY[0.5, 1.0, 1.0, 2.0])[n % 4 + 1]
FROM generate_series(1, 400) AS n
WHERE NOT EXISTS (SELECT 1 FROM clinic.vaccinations);

-- lab.test_results: laboratory tests of samples taken at appointments (600 rows).
CREATE TABLE IF NOT EXISTS lab.test_results (
    result_id       int PRIMARY KEY,
    appointment_id  int NOT NULL,
    test_code       text NOT NULL,      -- CBC, GLU, ALT, CREA
    sample_type     text NOT NULL,      -- кровь, моча
    taken_on        date NOT NULL,
    reading         numeric(8, 2) NOT NULL,
    flag            text NOT NULL       -- normal, high, low
);

INSERT INTO lab.test_results (result_id, appointment_id, test_code, sample_type, taken_on, reading, flag)
SELECT n,
       n * 3 % 1000 + 1,
       CASE WHEN n % 12 < 5 THEN 'CBC'
            WHEN n % 12 < 9 THEN 'GLU'
            WHEN n % 12 < 11 THEN 'ALT'
            ELSE 'CREA' END,
       CASE WHEN n % 4 = 3 THEN 'моча' ELSE 'кровь' END,
       date '2025-01-01' + (n * 13 % 540),
       round(((n * 29 % 1000) / 10.0)::numeric, 2),
       CASE WHEN n % 10 < 7 THEN 'normal'
            WHEN n % 10 < 9 THEN 'high'
            ELSE 'low' END
FROM generate_series(1, 600) AS n
WHERE NOT EXISTS (SELECT 1 FROM lab.test_results);

COMMIT;
