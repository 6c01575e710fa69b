/**
 * first_id and last_id of a list page. OpenAI's schemas require strings, so an empty page
 * answers the request's `after` cursor (passing last_id as `after` again asks the same question
 * later, which is how a client polls for newer items), or the empty string, which `after`
 * accepts as "from the start".
 */
export function pageBounds(data: ReadonlyArray<{ readonly id: string }>, after: string | undefined): { first_id: string; last_id: string } {
  if (data.length === 0) return { first_id: after ?? '', last_id: after ?? '' };
  return { first_id: data[0]!.id, last_id: data[data.length - 1]!.id };
}
