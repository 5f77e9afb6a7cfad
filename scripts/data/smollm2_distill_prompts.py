"""Generic distillation prompts for the SmolLM2 drafter: instructions and questions from templates x topics (seeded),
disjoint from the generic held-out prompts (``wisv/assets/smollm2-drafter/heldout.jsonl``) and from the long-form
task's calib and test pools (tests/wisv/tasks/test_pools.py checks both)."""
from __future__ import annotations

import random

TOPICS = ("the moon", "volcanoes", "honey bees", "the printing press", "rainbows", "photosynthesis", "the ocean",
          "electric cars", "chess", "coffee", "the Roman Empire", "recycling", "sleep", "penguins", "the internet",
          "bread baking", "gravity", "earthquakes", "vaccines", "the violin", "deserts", "trains", "music",
          "friendship", "gardening", "clouds", "dinosaurs", "the heart", "solar panels", "libraries", "rivers",
          "mathematics", "birds", "the weather", "computers", "soccer", "time zones", "paper", "salt", "glass",
          "bicycles", "elephants", "the alphabet", "maps", "snow", "tea", "robots", "forests", "money", "the sun",
          "magnets", "mountains", "cheese", "airplanes", "the brain", "whales", "batteries", "writing an email",
          "learning a language", "exercise", "cooking rice", "saving energy", "a job interview", "public speaking")
MORE_TOPICS = ("bridges", "lighthouses", "jellyfish", "wind turbines", "the stock market", "pizza", "chocolate",
               "the Olympic Games", "tornadoes", "coral reefs", "spiders", "owls", "the piano", "photography",
               "podcasts", "smartphones", "cloud computing", "spreadsheets", "the water cycle", "the solar system",
               "black holes", "comets", "the immune system", "bones", "teeth", "vitamins", "breakfast",
               "meditation", "yoga", "running", "swimming", "basketball", "tennis", "board games", "video games",
               "museums", "the theater", "poetry", "novels", "fairy tales", "the Great Wall of China",
               "ancient Egypt", "the Vikings", "castles", "knights", "pirates", "trees", "flowers", "mushrooms",
               "cactus plants", "frogs", "butterflies", "ants", "sharks", "dolphins", "horses", "cats", "dogs",
               "rabbits", "farming", "wheat", "rice", "potatoes", "apples", "bananas", "oranges", "soup", "pasta",
               "recycling plastic", "climate change", "air pollution", "clean water", "public transport",
               "city parks", "skyscrapers", "tunnels", "roads", "traffic lights", "maps and compasses", "the compass",
               "clocks", "calendars", "the telephone", "radio", "television", "newspapers", "email", "passwords",
               "online safety", "budgeting", "saving money", "shopping lists", "moving to a new city",
               "making friends", "teamwork", "leadership", "kindness", "patience", "curiosity", "homework",
               "taking notes", "reading aloud", "handwriting", "drawing", "painting", "pottery", "knitting",
               "camping", "hiking", "fishing", "the beach", "islands", "the Arctic", "the rainforest", "rain",
               "thunder", "fog", "seasons", "spring", "winter", "birthdays", "holidays", "weddings", "cooking eggs",
               "washing clothes", "cleaning a kitchen", "a morning routine", "a good night's sleep", "fire safety",
               "first aid", "hospitals", "nurses", "firefighters", "teachers", "farmers", "engineers", "scientists",
               "astronauts", "rockets", "satellites", "telescopes", "microscopes", "electricity", "light bulbs",
               "sound", "colors", "shapes", "fractions", "prime numbers", "geometry", "the number zero")
TEMPLATES = ("Explain {t} in simple terms.", "Write a short paragraph about {t}.", "What is {t}?",
             "Give me three facts about {t}.", "Why is {t} important?", "Describe {t} to a child.",
             "Write a haiku about {t}.", "List some interesting things about {t}.",
             "What are the benefits of {t}?", "Summarize the history of {t} in two sentences.",
             "Tell me a fun fact about {t}.", "How does {t} work?")
MORE_TEMPLATES = ("Write a short story that involves {t}.", "What are common mistakes people make about {t}?",
                  "Give me two tips related to {t}.", "Write a short poem about {t}.",
                  "Explain {t} to a ten-year-old in three sentences.", "What would the world be like without {t}?",
                  "Write a tweet about {t}.", "What questions would a student ask about {t}?",
                  "Describe {t} in one paragraph.", "What is surprising about {t}?",
                  "Write an opening sentence for an essay about {t}.", "Name three words related to {t}.",
                  "Compare {t} with something from everyday life.")
QUESTIONS = ("What is 12 plus 7?", "What is the opposite of hot?", "Spell the word 'house' backwards.",
             "What is the past tense of 'run'?", "What color is the sky on a clear day?",
             "How many days are in a week?", "Name a fruit that is yellow.", "What is 9 times 3?",
             "What is the plural of 'mouse'?",
             "Translate 'thank you' into French.", "Which animal says 'moo'?", "How many legs does a spider have?",
             "What is the first letter of the English alphabet?", "What do bees make?", "What is 100 minus 45?",
             "What is the freezing point of water in Celsius?", "Write the number seven as a digit.",
             "Give a synonym for 'happy'.", "What is the largest planet in our solar system?",
             "Put these words in alphabetical order: pear, apple, mango.")


def generic_pool() -> list[str]:
    """Every distinct generic prompt (templates x topics, plus short questions), sorted."""
    return sorted({tpl.format(t=t) for tpl in TEMPLATES + MORE_TEMPLATES for t in TOPICS + MORE_TOPICS}
                  | set(QUESTIONS))


def distill_prompts(n: int, seed: int) -> list[str]:
    """``n`` distinct generic prompts, shuffled with ``seed`` (the first ``n`` of one seeded order)."""
    pool = generic_pool()
    random.Random(seed).shuffle(pool)
    return pool[:n]
