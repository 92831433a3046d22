import t from 'tap';
import { fuzzingApp } from '../helpers/input-fuzz-app.ts';

// Input fuzzing (test/helpers/input-fuzz-app.ts): the operations of the OpenAPI document in shard 2.
const fuzzing = await fuzzingApp(t);
t.test('every operation of the OpenAPI document in management shard 2', async (t) => fuzzing.fuzzManagement(t, 2));
