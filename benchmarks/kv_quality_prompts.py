"""Fixed inputs of eval_kv_quality.py: chat prompts of four kinds and one long passage.

Everything here was written for this benchmark (no downloads, no third-party text). The
prompts are user turns; the benchmark renders them with the tokenizer's chat template. The
passage is plain prose for teacher forcing (perplexity and KL); it tokenizes to well over 1000
tokens with the SmolLM2 tokenizer.
"""

from __future__ import annotations

CHAT = [
    "What are three good habits for keeping a small vegetable garden healthy through the summer?",
    "My cat keeps knocking glasses off the table. Why do cats do that, and how can I stop it?",
    "Can you suggest a weekend itinerary for a first visit to a mid-sized European city?",
    "I have an interview for a junior accountant position tomorrow. How should I prepare tonight?",
    "Explain to a ten-year-old why the sky looks blue during the day and red at sunset.",
    "Write a short, friendly message inviting my neighbours to a street picnic next Saturday.",
    "What is the difference between baking soda and baking powder, and when do I use each?",
    "Give me some tips for sleeping better when I have to wake up very early for work.",
    "How do I politely decline a wedding invitation from a colleague I barely know?",
    "Describe a calm morning routine that takes less than thirty minutes.",
    "What should I pack for a three-day hiking trip in the mountains in early autumn?",
    "Tell me about the history of the bicycle in a few paragraphs.",
    "How can I make my small apartment feel more spacious without buying new furniture?",
    "Write a short poem about a lighthouse keeper who waits for a letter.",
]

JSON = [
    "Return a JSON object describing a fictional book with the keys title, author, year, genres "
    "(a list) and a short summary. Output only the JSON.",
    'Extract the people and places from this sentence as JSON with keys "people" and '
    '"places": Maria met Tom in Lisbon before they both flew to Oslo to visit Erik.',
    "Create a JSON array of five grocery items, each an object with name, quantity and unit.",
    "Give me a JSON configuration for a web server with host, port, a list of allowed origins "
    "and a logging section with level and file.",
    "Convert this to JSON: the meeting is on Tuesday at 10am in room 4B, attendees are Ana, "
    "Bilal and Chen, and the topic is the quarterly budget.",
    "Produce a JSON object for a user profile with id, username, email, a nested address object "
    "and a list of interests.",
    "Write a JSON schema for an order with an order id, a customer name, a list of line items "
    "(sku, quantity, price) and a total.",
    "Output a JSON list of three weather forecasts, each with day, high, low and condition.",
    "Summarize this review as JSON with keys sentiment, rating (1-5) and reasons: The hotel was "
    "clean and the staff were kind, but the room was noisy and breakfast was cold.",
    "Return JSON describing a recipe for pancakes: name, servings, ingredients (list of objects "
    "with item and amount) and steps (list of strings).",
    "Classify these words into JSON with keys fruits and vegetables: apple, carrot, banana, "
    "spinach, mango, leek, cherry.",
    "Create a JSON object for a calendar event with title, start, end (ISO 8601), location and "
    "a list of reminders in minutes.",
    "Return a JSON object with the fields name, version, dependencies (an object) and scripts "
    "(an object) for a small JavaScript project.",
    "Give a JSON array describing the planets of the solar system with name and order from the sun.",
]

CODE = [
    "Write a Python function that checks whether a string is a palindrome, ignoring case and spaces.",
    "Write a Python function that returns the n-th Fibonacci number iteratively, with a docstring.",
    "Implement binary search in Python over a sorted list and explain its running time.",
    "Write a SQL query that returns the five customers with the highest total order amount.",
    "Write a JavaScript function that debounces another function by a given number of milliseconds.",
    "Write a Python class for a simple stack with push, pop, peek and is_empty methods.",
    "Show how to read a CSV file in Python and compute the average of one numeric column.",
    "Write a bash script that counts the lines of every .txt file in the current directory.",
    "Write a Python function that merges two sorted lists into one sorted list.",
    "Explain what a Python list comprehension is and give three examples.",
    "Write a Python function that counts how often each word appears in a text.",
    "Write a C function that reverses a null-terminated string in place.",
    "Write a Python decorator that measures and prints how long a function takes to run.",
    "Write a regular expression that matches a simple email address and explain each part.",
]

REASONING = [
    "A train leaves at 9:40 and arrives at 13:15. How long is the journey? Explain step by step.",
    "If three pencils cost 1.20 dollars, how much do eleven pencils cost? Show your reasoning.",
    "A rectangle has a perimeter of 30 cm and its length is twice its width. Find its area, "
    "step by step.",
    "Is it better to pay off a credit card with 20% interest or to save money earning 3%? "
    "Reason it through carefully.",
    "Sam is older than Lea, and Lea is older than Max. Who is the youngest? Explain your reasoning.",
    "How many minutes are there in a week? Work it out step by step.",
    "A shop gives 25% off, then another 10% off the reduced price. What is the total discount? "
    "Think step by step.",
    "Explain why the sum of two odd numbers is always even.",
    "If a recipe for four people needs 300 g of flour, how much flour is needed for ten people? "
    "Explain.",
    "Compare the advantages and disadvantages of working from home, and give a balanced conclusion.",
    "A tank fills in 6 hours with one pipe and in 3 hours with another. How long with both "
    "pipes together? Reason step by step.",
    "Why do we have seasons on Earth? Give a careful explanation.",
    "What is 15% of 240, and how can you compute it in your head? Explain.",
    "Plan the steps to move house with as little stress as possible, and explain the order you chose.",
]

PROMPTS = CHAT + JSON + CODE + REASONING
KINDS = (
    ["chat"] * len(CHAT)
    + ["json"] * len(JSON)
    + ["code"] * len(CODE)
    + ["reasoning"] * len(REASONING)
)

# Composed for this benchmark: plain expository and narrative prose, no quotations.
PASSAGE = """\
The Keeper of the Harbour Light

On the northern edge of a small fishing town there is a stone lighthouse that has stood for more
than two hundred years. It is not tall, and it is not famous, but for the people who live along
that stretch of coast it has always been the first thing they look for when they come home from
the sea. The tower is painted white with a single red band near the top, and its lamp turns
slowly through the night, sweeping across the water every twelve seconds.

For most of its history the lighthouse was tended by a keeper who lived in the cottage at its
base. The keeper climbed the spiral stairs at dusk to light the lamp, wound the clockwork that
turned the lens, trimmed the wick, and polished the glass so that the beam would carry as far as
possible. In bad weather the keeper stayed awake through the night, watching for ships in
trouble and writing in a logbook the direction of the wind, the state of the sea and the names of
any vessels that passed close to the rocks.

The logbooks are kept today in the town library, in a cool room at the back where the windows
face away from the sun. Reading them is a strange experience. The handwriting changes every few
decades as one keeper retires and another takes over, but the entries themselves are remarkably
similar. Wind from the south west, moderate. Sea rough. Lamp lit at half past four. Two trawlers
returned before dark. Fog after midnight; bell rung every two minutes until dawn. Over the years
these short lines add up to a kind of history of the town, told not through great events but
through the weather and the comings and goings of boats.

One of the keepers, a woman who held the post for nearly thirty years, added small notes in the
margins of her logbooks. She recorded the first swallows of spring, the day the ice broke up in
the inner harbour, and the evening a whale surfaced so close to the point that she could hear it
breathe. She also wrote about the children who came to visit the tower, and about the questions
they asked. Why does the light turn? Why is the glass shaped like a beehive? What happens if the
lamp goes out? Her answers, written in a neat and patient hand, explain the workings of the
lighthouse more clearly than many of the official manuals.

The light turns, she wrote, so that sailors can tell one lighthouse from another. Each tower along
the coast has its own pattern of flashes, and a navigator who counts the seconds between them
can find the name of the light on a chart and know exactly where the ship is. The glass is shaped
like a beehive because it is made of many rings of prisms, each one bending the light from the
lamp so that it leaves the tower as a single strong beam instead of spreading out in every
direction and fading. If the lamp goes out, she wrote, the keeper must light it again before
anything else, because a ship that expects to see a light and does not find it may believe it is
somewhere else entirely, and that mistake can be more dangerous than no light at all.

In the middle of the last century the lighthouse was converted to electricity, and a few decades
later it was made fully automatic. A sensor now switches the lamp on when the daylight fades, and
a small motor turns the lens. Engineers visit a few times a year to check the equipment and
replace worn parts. The cottage at the base of the tower stood empty for some time, and its roof
began to leak. Eventually a group of volunteers from the town raised enough money to repair it,
and today it is a small museum where visitors can see the old clockwork, a set of brass oil
lamps, the logbooks on loan from the library, and a model of the lens that can be taken apart to
show how the prisms fit together.

The volunteers also run guided walks along the coast path. The walk begins at the harbour, where
the fishing boats are tied up in rows, and follows the cliff edge past the ruins of an old lime
kiln and a row of wartime observation posts. On a clear day it is possible to see three other
lighthouses from the top of the path, each one marking a different danger: a reef to the east, a
sandbank in the mouth of the estuary, and a narrow channel between two islands to the north. The
guides explain how sailors once used these lights together, taking bearings on two or three of
them at once and drawing lines on their charts until the lines crossed at the position of the
ship.

Modern ships carry satellite receivers that give their position to within a few metres, and some
people ask whether lighthouses are still needed at all. The guides have a simple answer.
Electronic systems are excellent, they say, but they can fail, and when they fail they tend to
fail at the worst possible moment, in a storm, when the power is unreliable and the crew are
tired. A light on a headland does not depend on any of that. It is visible to the naked eye, it
needs no equipment on board, and it means the same thing today as it did two hundred years ago.
For small boats, which often carry only basic instruments, the lights remain an essential part of
safe navigation.

There is another reason the town cares about its lighthouse, and it has little to do with
navigation. For generations, families waiting for a boat to return have walked out to the point
in the evening to watch the sea. The light turning above them has become a symbol of patience
and of hope, of someone keeping watch on behalf of everyone else. When the volunteers asked
people in the town what the lighthouse meant to them, many answered with a story rather than a
description: a grandfather who came home safely through a storm, a wedding photograph taken on the
steps of the tower, a winter night when the whole town stood on the cliff and watched the beam
sweep across the snow.

The museum keeps a notebook by the door where visitors can write a few lines before they leave.
Some write about the view, some about the old equipment, and some simply write the date and the
weather, in the same short style as the keepers before them. Wind light from the west. Sea calm.
Visited the tower with my daughter; she counted the flashes all the way home. It is a small thing,
but it suggests that the habit of keeping a record, of paying attention to the sea and the sky and
writing down what one sees, has outlived the job that created it.

At the end of each guided walk the guides stop at the foot of the tower and tell one last story.
During a storm many years ago, they say, the lamp failed in the middle of the night. The keeper
on duty, unable to repair it in the dark, carried a hand lantern to the top of the tower and
turned it by hand, walking in a slow circle around the lens for six hours so that the pattern of
the light would not change. In the morning a fishing boat that had been caught out by the storm
came into the harbour, and its skipper climbed the hill to thank the keeper. He had seen the
light, he said, and counted the seconds, and known where he was. Nobody is sure whether the story
is true in every detail, but everyone in the town knows it, and the children who hear it at the
end of the walk usually look up at the tower for a long time before they go home.
"""
