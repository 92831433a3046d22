import t from 'tap';
import { fuzzingApp } from '../helpers/input-fuzz-app.ts';

// Input fuzzing (test/helpers/input-fuzz-app.ts): every endpoint GET /v1 lists.
const fuzzing = await fuzzingApp(t);
t.test('every /v1 endpoint, with request bodies logged', async (t) => fuzzing.fuzzV1(t));
